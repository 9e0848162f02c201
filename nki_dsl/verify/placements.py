"""Where directly allocated tensors live: the per-block rectangles an ``alloc``'s ``address`` attribute gives
(language/direct_allocation.py), and the physical footprint the capacity rules count for them.

A block is a rectangle of partitions ``[part, part + P)`` x bytes ``[byte, byte + F)`` of every partition, ``P``
the tensor's partition count and ``F`` the bytes of one block's free dimensions. Blocks that share a rectangle by
design (``num_free_tiles=(2,)``) take its space once: the allocator (``passes/allocate._fixed``) and with it the
``sbuf-capacity`` rule place such a tensor as its blocks' bounding rectangle, and ``banks_of`` gives the PSUM bank
ids a tensor's blocks touch (so tensors placed in one bank on purpose can be counted once across tensors too).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from nki_dsl import dtypes
from nki_dsl.ir.nodes import Op
from nki_dsl.ir.types import TensorType


@dataclass(frozen=True)
class Rect:
    """Block ``index`` (its block-dimension indices) at partitions ``[p_lo, p_hi)`` x bytes ``[b_lo, b_hi)``."""

    index: tuple[int, ...]
    p_lo: int
    p_hi: int
    b_lo: int
    b_hi: int

    def overlaps(self, o: Rect) -> bool:
        return self.p_lo < o.p_hi and o.p_lo < self.p_hi and self.b_lo < o.b_hi and o.b_lo < self.b_hi

    def same_space(self, o: Rect) -> bool:
        return (self.p_lo, self.p_hi, self.b_lo, self.b_hi) == (o.p_lo, o.p_hi, o.b_lo, o.b_hi)

    def describe(self) -> str:
        return f"partitions {self.p_lo}..{self.p_hi - 1}, bytes {self.b_lo}..{self.b_hi - 1}"


def start_step(partitions: int, total: int) -> int:
    """The step between the start partitions allowed for a tensor spanning ``partitions`` of ``total``: over half
    starts at 0, over a quarter at 0 or the middle, else at a quarter boundary (reference/nki.md §1.2)."""
    return total if partitions > total // 2 else total // 2 if partitions > total // 4 else total // 4


def block_bytes(ty: TensorType) -> int:
    """Bytes per partition of one block: its free dimensions times the item size."""
    return dtypes.get(ty.dtype).itemsize * math.prod(ty.free_shape)


def blocks(ty: TensorType) -> int:
    return math.prod(ty.block_shape)


def is_placed(op: Op) -> bool:
    return bool(op.attrs.get("address")) and op.result is not None and op.result.type.buffer.on_chip


def rects(op: Op) -> list[Rect] | None:
    """The blocks of the tensor ``op`` declares with a direct allocation, in row-major block order; None when the
    allocator places it (or the attribute has neither two entries per block nor one pair for the whole tensor,
    whose blocks then lie side by side: the rule reports that)."""
    if not is_placed(op):
        return None
    ty, address = op.result.type, tuple(op.attrs["address"])
    n, f = blocks(ty), block_bytes(ty)
    if len(address) == 2 and n > 1:  # one pair for the whole tensor: its blocks side by side from there
        address = tuple(v for k in range(n) for v in (address[0], address[1] + k * f))
    if len(address) != 2 * n:
        return None
    out = []
    for k, idx in enumerate(itertools.product(*(range(b) for b in ty.block_shape))):
        part, byte = address[2 * k], address[2 * k + 1]
        out.append(Rect(idx, part, part + ty.partitions, byte, byte + f))
    return out


def banks_of(op: Op, bank_bytes: int) -> frozenset[int] | None:
    """The PSUM banks a directly allocated tensor's blocks touch (None: not directly allocated)."""
    rs = rects(op)
    if rs is None:
        return None
    return frozenset(b for r in rs for b in range(r.b_lo // bank_bytes, (r.b_hi - 1) // bank_bytes + 1))
