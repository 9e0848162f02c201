"""The buffer region an access touches, as Python source evaluated per instruction.

A region is a box in the tensor's own index space: per tensor dimension a half-open range ``[lo, hi)``. An index
``const + sum(c * loop/pid var) + sum(k * axis)`` spans ``[rest + min, rest + max]`` over the access axes, so only
``rest`` depends on the instruction; the axis extremes are folded into constants once per op. Strided or diagonal
accesses get their bounding box (conservative: it may add a dependence, never drop one).

Boxes are flat tuples ``(lo0, hi0, lo1, hi1, ...)``. For an on-chip tensor dimension 0 is the partition range and
the rest the free (element) ranges; ``byte_range`` turns those into the bytes of one partition.
"""

from __future__ import annotations

from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.nodes import Access


def _is_axis(v: str) -> bool:
    return var_kind(v) == "axis"


def box_source(access: Access, slots: dict[str, int], clip: bool) -> str:
    """Source of the flat box tuple of ``access``; loop indices and program ids read ``env[slot]``."""
    dims = access.tensor.type.shape
    parts = []
    for d, e in enumerate(access.index):
        lo = hi = e.const
        rest = []
        for v, c in e.terms:
            if _is_axis(v):
                ext = access.shape[int(v[1:])] - 1
                lo += min(0, c * ext)
                hi += max(0, c * ext)
            else:
                rest.append(f"{c}*env[{slots[v]}]" if c != 1 else f"env[{slots[v]}]")
        off = " + ".join(rest)
        lo_s = f"{off} + {lo}" if off else str(lo)
        hi_s = f"{off} + {hi + 1}" if off else str(hi + 1)
        if clip:  # masked ops may index past the tensor where the mask is off; the touched part is inside it
            lo_s, hi_s = f"max(0, {lo_s})", f"min({dims[d]}, {hi_s})"
        parts += [lo_s, hi_s]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def whole_box(shape: tuple[int, ...]) -> tuple[int, ...]:
    out: list[int] = []
    for s in shape:
        out += [0, s]
    return tuple(out)


def byte_range(box: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Bytes ``[lo, hi)`` within one partition spanned by the free dimensions of an on-chip box (row-major)."""
    lo = hi = 0
    stride = itemsize
    for d in range(len(shape) - 1, 0, -1):
        lo += box[2 * d] * stride
        hi += (box[2 * d + 1] - 1) * stride
        stride *= shape[d]
    return lo, hi + itemsize


def hbm_byte_ranges(box: tuple[int, ...], shape: tuple[int, ...], itemsize: int) -> list[tuple[int, int]]:
    """The contiguous byte ranges of a box of a linear (HBM) tensor, one per row of its last dimension."""
    strides = [itemsize] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    rows = [0]
    for d in range(len(shape) - 1):
        rows = [r + i * strides[d] for r in rows for i in range(box[2 * d], box[2 * d + 1])]
    last = len(shape) - 1
    lo, hi = box[2 * last] * itemsize, box[2 * last + 1] * itemsize
    return [(r + lo, r + hi) for r in rows]
