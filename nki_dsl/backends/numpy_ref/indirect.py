"""Indirect DMA on the NumPy reference (ir/indirect.py): partition ``p`` of the tile moves row ``indices[p]`` of
the HBM tensor's ``indirect_dim``; the other dimensions are addressed by the access's affine index as usual.

The generated code builds one index array per HBM dimension (the rows from the index tile, the others from
``np.arange`` over the access axes) and gathers or scatters with NumPy advanced indexing. Every row is checked
against the dimension first: an index outside it raises ``NkiRuntimeError`` naming the kernel line, the op, the
partition, the value and the dimension, as the DMA's ``oob_mode=error`` does on the device. A scatter whose
indices repeat writes the rows in partition order (the last partition wins), scatter-add sums every partition.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.backends.numpy_ref.access_code import _split, affine_code
from nki_dsl.backends.numpy_ref.emitter import Lowered, tensor_var
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
    # under a mask (a gather's, over its partitions only: rule indirect-dma) the op runs on the box of partitions
    # the mask keeps; the indices of the others are neither read nor checked
    lo, _, n = ctx.box.get(0, ("0", None, str(hbm.shape[0])))
    ctx.e.line(f"{rows_var} = {ctx.e.const(rows)}({ctx.read('indices', axes={0: 0})}, "
               f"{hbm.tensor.type.shape[dim]}, {where}, {lo})")
    subs = index_arrays(ctx, hbm, dim, rows_var)
    array = tensor_var(hbm.tensor.name)
    shape = ", ".join([n] + [str(s) for s in hbm.shape[1:]])
    if side == "src":  # a gather: the rows, as an array of the tile's shape
        value = f"np.broadcast_to({array}[{subs}], ({shape},))"
        if op.result is not None:
            return Lowered(value, fresh=False)
        return Lowered(writes=[("dst", value, op.attrs.get("dst_rmw_op", "none"))])
    value = ctx.read("value" if "value" in op.operands else "src", axes=None)
    target = f"{array}[{subs}]"
    converted = f"to_hbm(np.broadcast_to({value}, ({shape},)), {hbm.tensor.type.dtype!r})"
    if op.attrs.get("dst_rmw_op", "none") == "add":
        ctx.e.line(f"np.add.at({array}, {subs}, {converted})")
    else:
        ctx.e.line(f"{target} = {converted}")
    return Lowered()
