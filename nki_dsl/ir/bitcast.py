"""``t.view(dtype)``: a tile's bits reinterpreted as another dtype (reference/nki.md §2.7 "Access patterns &
views": ``.view(dtype)`` = ``reinterpret_cast``, the last dim scaled by the size ratio, f32 ``(128, 64)`` -> u8
``(128, 256)``; last dim contiguous and divisible when widening).

The backends hold on-chip float tiles as fp32 *values* already rounded to the tile's dtype, not as its bytes
(``backends/numpy_ref/runtime.py``), so a reinterpretation cannot alias the source's storage there. It is an
explicit instruction instead: ``nisa.tensor_copy`` with ``view_bytes = (source bytes, result bytes)`` per element
makes a new tile whose bits are the source's. Each backend computes it the one way this module states, which is
exact because the held values are exactly representable in their dtype:

1. the held source values to the source dtype's storage (a float tile's fp32 values to bf16, fp8, ... exactly);
2. those bytes read as the result dtype's storage (row-major: the last axis scales by the ratio);
3. the result held as that dtype's tiles are (float storage widened to fp32, exactly).

Every bit pattern survives both ways except NaN patterns of a float side: they come back as a NaN, not always the
same one (the fp32 values keep NaN-ness; the conversions between fp32 and bf16 / fp16 / fp8 storage do not keep
a NaN's payload bits). Packed MX types (``float8_e4m3fn_x4`` ...) are raw unsigned words and reinterpret like
ints. ``bool`` has no defined bit layout and is refused.

What a kernel sees: a view is read when it is made (a snapshot of the source then); writing a view writes
nothing: the verifier's ``bitcast`` rule refuses writing into a view (the source would not change) and reading a
view after its source was written (it would see stale bits here and new ones on hardware) (``trace/views.py``).
"""

from __future__ import annotations

from nki_dsl import dtypes

ENGINES = ("vector", "gpsimd")  # the bit-exact copy engines (§2.7 tensor_copy: "Vector & GpSimd bit-exact")


def refusal(src: str, dst: str) -> str | None:
    """Why tiles of dtype ``src`` cannot be viewed as ``dst`` (None when they can)."""
    for name in (src, dst):
        if dtypes.get(name).kind == "bool":
            return f"{name} has no defined bit layout; view it as uint8"
    return None


def view_bytes(src: str, dst: str) -> tuple[int, int]:
    return dtypes.get(src).itemsize, dtypes.get(dst).itemsize
