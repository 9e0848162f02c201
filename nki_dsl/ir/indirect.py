"""Indirect DMA in the IR (reference/nki.md §2.7 "Indirect DMA"): a DMA whose HBM side picks rows with values held
in an on-chip integer tile, ``nl.load(data[idx_tile, i_f])`` (a gather) and ``nl.store(data[idx_tile, i_f],
value=t)`` (a scatter).

The op (``nl.load``, ``nl.store`` or ``nisa.dma_copy``) carries the index tile as its optional operand
``indices`` (SBUF, integer, one value per partition: shape ``[P, 1, ...]``) and the attribute ``indirect_dim``:
the dimension of the HBM tensor the values index. The HBM operand is an ordinary access of the tile's shape whose
index at ``indirect_dim`` is the partition axis ``d0``, a placeholder: partition ``p`` of the tile moves row
``indices[p]`` of that dimension, whatever ``d0`` says. So shape, buffer and partition rules read the op as the
plain DMA of a ``[P, ...]`` tile it is, and every rule that needs to know which elements the DMA may touch asks
``widened`` for the conservative access: the whole of ``indirect_dim``, as the rows are known only at run time
(no static bounds proof; the backends check each index when the DMA runs).
"""

from __future__ import annotations

from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Op

INDICES = "indices"
DIM = "indirect_dim"
PLACEHOLDER = Affine.var("d0")


def hbm_operand(op: Op) -> str | None:
    """The name of the operand whose rows ``op``'s index tile picks, or None for a DMA with static addresses."""
    if INDICES not in op.operands:
        return None
    for name in ("src", "dst"):
        a = op.operands.get(name)
        if isinstance(a, Access) and not a.tensor.type.buffer.on_chip:
            return name
    return None


def widened(op: Op, name: str, access: Access) -> Access:
    """``access`` (operand ``name`` of ``op``) as the set of elements it may touch: for the HBM side of an indirect
    DMA, every row of ``indirect_dim`` (a new axis spanning the dimension); any other access as it is."""
    if INDICES not in op.operands or name != hbm_operand(op):
        return access
    dim = op.attrs.get(DIM)
    if not isinstance(dim, int) or not 0 <= dim < len(access.index):
        return access
    n = len(access.shape)
    index = tuple(Affine.var(f"d{n}") if k == dim else e for k, e in enumerate(access.index))
    return Access(access.tensor, index, tuple(access.shape) + (access.tensor.type.shape[dim],))
