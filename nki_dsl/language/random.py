"""``nl.rand``: a tile of uniform draws in [0, 1) from the generator ``nl.random_seed`` seeds.

Composed from the random-bits instruction (``nisa.rng``, reference/nki.md §2.7 "Random": random 32-bit words, on
the Vector engine of every target) as NKI's description allows: the low 24 bits of each word, converted to fp32
(exactly: 24-bit integers are fp32 numbers) and scaled by 2^-24, are uniform on the 2^24 multiples of 2^-24 in
[0, 1). The backends' generator is their own model (nki_dsl/backends/numpy_ref/runtime.py ``RandomState``), not
the hardware's stream.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op

_MANTISSA_BITS = 24  # fp32 holds every integer below 2^24 exactly


def rand(shape, dtype="float32", **kwargs):
    """A new SBUF tile of ``shape``: uniform draws in [0, 1), converted to ``dtype`` (a float type)."""
    name = dtypes.normalize(dtype)
    if not dtypes.get(name).is_float:
        raise NkiApiError(f"rand draws floats in [0, 1), not {name}; for random bits use nisa.rng", caller_loc(),
                          "nl.rand")  # fmt: skip
    shape = tuple(int(s) for s in shape)
    bits = build_op("nisa.rng", {}, {"shape": shape, "engine": "vector"}, dtype="uint32")
    low = build_op("nl.bitwise_and", {"x": bits, "y": (1 << _MANTISSA_BITS) - 1}, dtype="uint32")
    as_float = build_op("nl.copy", {"x": low}, dtype="float32")
    return build_op("nl.multiply", {"x": as_float, "y": 2.0**-_MANTISSA_BITS}, dtype=name)
