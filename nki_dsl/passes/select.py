"""The ``lower-language`` rule for ``nl.where``: a Vector-engine select. NKI's exact lowering is unconfirmed
(reference/nki.md §2.4); the instruction that selects per element is ``tensor_copy_predicated`` (§2.3), so the
result first holds one side (a ``tensor_copy`` of a tile, or a ``memset`` of a number) and the other side is
copied over it where the condition picks it (``reverse_pred`` where it does not).

Operands that broadcast are read with stride 0 along their size-1 free axes; one spread across partitions is first
copied into a tile of the result's shape by a DMA, since compute engines cannot stride across partitions (§1.2).
"""

from __future__ import annotations

from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.passes.rewrite import RewriteContext, broadcast_access, full


def where(op: Op, ctx: RewriteContext) -> list:
    c, x, y, r = op.operands["condition"], op.operands["x"], op.operands["y"], op.result
    shape = tuple(r.type.shape)
    out: list = []

    def stretched(a: Access) -> Access:
        if tuple(a.shape) == shape:
            return a
        src = broadcast_access(a, shape)
        if a.shape[0] == 1 and shape[0] != 1:  # across partitions: a DMA gathers the one row into every partition
            t = ctx.tile(op, shape, a.tensor.type.dtype, hint=a.tensor.name)
            t.kind = "alloc"
            out.extend([ctx.op("alloc", op, {}, {}, t, mask=None),
                        ctx.op("nisa.dma_copy", op, {"dst": full(t), "src": src})])  # fmt: skip
            return full(t)
        return src

    def fill(value, into, dtype=None):
        if isinstance(value, Imm):
            return ctx.op("nisa.memset", op, {"value": value}, {"shape": shape}, into)
        return ctx.op("nisa.tensor_copy", op, {"src": stretched(value)}, {}, into)

    # The base is the side that is a number if one is (a memset), else y; the other side is the copied source.
    reverse = isinstance(x, Imm) and not isinstance(y, Imm)
    base, other = (x, y) if reverse else (y, x)
    out.append(fill(base, r))
    if isinstance(other, Imm):  # both numbers: the source is a memset tile too
        tmp = ctx.tile(op, shape, r.type.dtype)
        out.append(fill(other, tmp))
        other = full(tmp)
    src, pred = stretched(other), stretched(c)
    out.append(ctx.op("nisa.tensor_copy_predicated", op, {"dst": full(r), "src": src, "predicate": pred},
                      {"reverse_pred": reverse}))  # fmt: skip
    return out
