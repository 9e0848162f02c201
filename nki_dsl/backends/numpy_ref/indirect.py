"""Indirect DMA on the NumPy reference (ir/indirect.py): partition ``p`` of the tile moves row ``indices[p]`` of
the HBM tensor's ``indirect_dim``; the other dimensions are addressed by the access's affine index as usual.

The generated code builds one index array per HBM dimension (the rows from the index tile, the others from
``np.arange`` over the access axes) and gathers or scatters with NumPy advanced indexing. Every row is checked
against the dimension first: an index outside it raises ``NkiRuntimeError`` naming the kernel line, the op, the
partition, the value and the dimension, as the DMA's ``oob_mode=error`` does on the device. A ``nisa.dma_copy``
with ``oob_mode=skip`` drops the transfer of each partition whose index is out of range instead (§2.7 dma_copy:
"``skip`` drops that index's transfer"): a gather leaves that partition of ``dst`` as it was, a scatter writes
nothing for it. A scatter whose indices repeat writes the rows in partition order (the last partition wins),
scatter-add sums every partition.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.backends.numpy_ref.access_code import _split, affine_code
from nki_dsl.backends.numpy_ref.emitter import Lowered, tensor_var
from nki_dsl.backends.numpy_ref.runtime import ROUND
from nki_dsl.errors import NkiRuntimeError, SourceLoc
from nki_dsl.ir import indirect


def rows(values, size: int, where: tuple, first: int = 0) -> np.ndarray:
    """The row numbers an index tile holds (one per partition, from partition ``first``: a mask's box), checked
    against a dimension of ``size``."""
    ix = np.asarray(values).reshape(len(values), -1)[:, 0].astype(np.int64)
    bad = np.flatnonzero((ix < 0) | (ix >= size))
    if bad.size:
        p = int(bad[0])
        loc, op, tensor, dim = where
        raise NkiRuntimeError(f"index {int(ix[p])} from partition {p + first} of operand 'indices' is outside "
                              f"dimension {dim} of %{tensor} (0..{size - 1}); {bad.size} of {ix.size} indices are "
                              f"out of range", loc, op)  # fmt: skip
    return ix


def kept_rows(values, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``oob_mode=skip``: the row numbers an index tile holds, those out of range replaced by row 0 (read, never
    used), and which partitions are in range (the transfers that happen)."""
    ix = np.asarray(values).reshape(len(values), -1)[:, 0].astype(np.int64)
    ok = (ix >= 0) & (ix < size)
    return np.where(ok, ix, 0), ok


def keep_skipped(gathered, old, ok, dtype_name: str) -> np.ndarray:
    """A skipping gather's rows: the gathered ones where ``ok``, ``dst``'s held values (``old``) elsewhere, both as
    ``dst`` (of ``dtype_name``) holds them."""
    new = ROUND[dtype_name](gathered)
    return np.where(ok.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)


def index_arrays(ctx, access, dim: int, rows_var: str) -> str:
    """Source of the tuple of index arrays addressing ``access`` with the rows of ``rows_var`` at ``dim``."""
    ndim = len(access.shape)
    subs = []
    for k, e in enumerate(access.index):
        if k == dim:
            subs.append(f"{rows_var}.reshape((-1,{' 1,' * (ndim - 1)}))")
            continue
        axes, rest = _split(e)
        terms = []
        for a, c in axes.items():
            view = tuple(-1 if j == a else 1 for j in range(ndim))
            terms.append(ctx.e.const(np.arange(access.shape[a]).reshape(view) * c))
        if not rest.is_const or rest.const or not terms:
            terms.append(f"({affine_code(rest)})")
        subs.append(" + ".join(terms))
    return "(" + ", ".join(subs) + ",)"


def lower(ctx, side: str):
    """The Lowered of an indirect ``dma_copy`` / ``nl.load`` / ``nl.store`` (``side``: its HBM operand)."""
    op = ctx.op
    hbm = op.operands[side]
    dim = op.attrs[indirect.DIM]
    where = ctx.e.const((op.loc if isinstance(op.loc, SourceLoc) else None, op.name, hbm.tensor.name, dim))
    rows_var = ctx.e.tmp()
    skip = op.attrs.get("oob_mode") == "skip"
    # under a mask (a gather's, over its partitions only: rule indirect-dma) the op runs on the box of partitions
    # the mask keeps; the indices of the others are neither read nor checked
    lo, _, n = ctx.box.get(0, ("0", None, str(hbm.shape[0])))
    indices = ctx.read("indices", axes={0: 0})
    if skip:
        ok_var = ctx.e.tmp()
        ctx.e.line(f"{rows_var}, {ok_var} = {ctx.e.const(kept_rows)}({indices}, {hbm.tensor.type.shape[dim]})")
        if side == "dst":  # a skipping scatter moves the partitions in range only
            ctx.e.line(f"{rows_var} = {rows_var}[{ok_var}]")
    else:
        ctx.e.line(f"{rows_var} = {ctx.e.const(rows)}({indices}, {hbm.tensor.type.shape[dim]}, {where}, {lo})")
    subs = index_arrays(ctx, hbm, dim, rows_var)
    array = tensor_var(hbm.tensor.name)
    shape = ", ".join([n] + [str(s) for s in hbm.shape[1:]])
    if side == "src":  # a gather: the rows, as an array of the tile's shape
        value = f"np.broadcast_to({array}[{subs}], ({shape},))"
        if op.result is not None:
            return Lowered(value, fresh=False)
        if skip:  # the skipped partitions of dst keep their values
            dst_dtype = op.operands["dst"].tensor.type.dtype
            value = f"{ctx.e.const(keep_skipped)}({value}, {ctx.read('dst')}, {ok_var}, {dst_dtype!r})"
        return Lowered(writes=[("dst", value, op.attrs.get("dst_rmw_op", "none"))])
    value = ctx.read("value" if "value" in op.operands else "src", axes=None)
    target = f"{array}[{subs}]"
    moved = f"np.broadcast_to({value}, ({shape},))"
    if skip:
        moved = f"{moved}[{ok_var}]"
    converted = f"to_hbm({moved}, {hbm.tensor.type.dtype!r})"
    if op.attrs.get("dst_rmw_op", "none") == "add":
        ctx.e.line(f"np.add.at({array}, {subs}, {converted})")
    else:
        ctx.e.line(f"{target} = {converted}")
    return Lowered()
