"""The ``lower-language`` pass: every ``nl`` op rewritten to engine instructions, one rule per op (reference/nki.md
§2.4, what the NKI compiler does):

* ``nl.load`` / ``nl.store`` -> ``nisa.dma_copy`` (a store of a PSUM tile first copies it to SBUF: DMA cannot read
  PSUM, §1.1); ``nl.load_transpose2d`` -> ``nisa.dma_transpose``; a load's tile becomes an explicit ``alloc``;
* ``nl.matmul`` -> ``nisa.nc_matmul`` (with ``transpose_x=False`` the x tile is first transposed on the Tensor
  engine and copied back to SBUF, since the Tensor engine reads SBUF only);
* ``nl.transpose`` -> ``nisa.nc_transpose``: on the Vector engine into SBUF when both sides are <= 32, else on the
  Tensor engine into PSUM followed by a copy to SBUF;
  Masks of transposes are over the result's axes, as the op table says of the instructions;
* ``nl.copy`` -> ``nisa.tensor_copy``; ``nl.full`` (zeros, ones) -> ``nisa.memset``, except the zeros of a PSUM
  accumulator whose next use is ``acc += matmul`` opening a loop: that accumulation gets ``zero_first`` (its first
  iteration starts from zero: the Tensor engine's first matmul of a group overwrites, as NKI lowers it) and the
  memset goes, so the in-order Vector engine does not hold up the Tensor engine zeroing the next accumulator;
* ``nl.where`` -> ``nisa.tensor_copy_predicated`` over a copy (or memset) of the other side (``select``);
  ``nl.dropout`` -> ``nisa.dropout`` (Vector engine, §2.3);
* ``nl.broadcast_to`` -> a copy reading the source with stride 0 along the broadcast axes: a DMA when it spreads
  one partition over many (compute engines cannot stride across partitions, §1.2), else ``tensor_copy``;
* ``nl.expand_dims`` -> ``tensor_copy`` of the same elements viewed with the inserted axes;
* elementwise math and reductions: ``lower_math``.

``assign`` (``t[...] = v``, ``t[...] += v``) stays, with one meaning in lowered IR: it names the destination of
the instruction immediately before it, which writes (or accumulates into) that region directly, as NKI
instructions with ``dst=`` do; the source tile is never materialised. So ``acc += nl.matmul(...)`` is one
``nc_matmul`` accumulating into the PSUM tile. Where the source is not such a tile (an immediate, a tile used
elsewhere, or a Tensor-engine result bound for SBUF) the rule inserts the ``memset`` / ``tensor_copy`` that writes.

Exemptions (kept as ``nl`` ops, see ``engines.EXEMPT``): ``nl.random_seed`` and ``nl.shared_constant``, which
are no data instructions.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.ir.nodes import Access, Imm, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.ops.language import BINARY_NL, REDUCTIONS, UNARY_NL
from nki_dsl.ir.types import Buffer
from nki_dsl.passes import lower_math, select
from nki_dsl.passes.engines import engine_of
from nki_dsl.passes.rewrite import Pass, RewriteContext, broadcast_access, full


def _alloc(ctx: RewriteContext, like: Op, t: Tensor) -> Op:
    """An explicit allocation of ``t`` (a load's destination, an nl.full's tensor), unmasked: the tile exists even
    where a mask leaves it unwritten. It keeps the placement a direct allocation gave ``like`` (``address``)."""
    t.kind = "alloc"
    attrs = {"address": like.attrs["address"]} if "address" in like.attrs else {}
    return ctx.op("alloc", like, {}, attrs, t, mask=None)


def _indirect(op: Op) -> tuple[dict, dict]:
    """The ``indices`` operand and ``indirect_dim`` attribute of an indirect DMA (ir/indirect.py), for the
    dma_copy it lowers to; empty for a DMA with static addresses."""
    if "indices" not in op.operands:
        return {}, {}
    return {"indices": op.operands["indices"]}, {"indirect_dim": op.attrs["indirect_dim"]}


def load(op: Op, ctx: RewriteContext) -> list:
    operands, attrs = _indirect(op)
    write = ctx.op("nisa.dma_copy", op, {"dst": full(op.result), "src": op.operands["src"], **operands}, attrs)
    return [_alloc(ctx, op, op.result), write]


def load_transpose2d(op: Op, ctx: RewriteContext) -> list:
    # A mask stays over the result's axes: dma_transpose's op-table entry says its operand's axes are permuted.
    return [ctx.op("nisa.dma_transpose", op, {"src": op.operands["src"]}, {"axes": (1, 0)}, op.result)]


def store(op: Op, ctx: RewriteContext) -> list:
    value, out = op.operands["value"], []
    if value.tensor.type.buffer == Buffer.PSUM:  # DMA cannot read PSUM: copy to SBUF on the Vector engine
        staged = ctx.tile(op, value.shape, value.tensor.type.dtype)
        out.append(ctx.op("nisa.tensor_copy", op, {"src": value}, {}, staged))
        value = full(staged)
    operands, attrs = _indirect(op)
    return out + [ctx.op("nisa.dma_copy", op, {"dst": op.operands["dst"], "src": value, **operands}, attrs)]


def matmul(op: Op, ctx: RewriteContext) -> list:
    x, y, out = op.operands["x"], op.operands["y"], []
    if not op.attrs["transpose_x"]:  # x is [M, K]: the stationary operand must be [K, M]
        xt_psum = ctx.tile(op, x.shape[::-1], x.tensor.type.dtype, "psum")
        xt = ctx.tile(op, x.shape[::-1], x.tensor.type.dtype)
        out += [ctx.op("nisa.nc_transpose", op, {"data": x}, {"engine": "tensor"}, xt_psum, mask=None),
                ctx.op("nisa.tensor_copy", op, {"src": full(xt_psum)}, {}, xt, mask=None)]  # fmt: skip
        x = full(xt)
    return out + [ctx.op("nisa.nc_matmul", op, {"stationary": x, "moving": y}, {}, op.result)]


def transpose(op: Op, ctx: RewriteContext) -> list:
    # A mask (over the result's axes) carries over to the transpose and to the copy out of PSUM.
    x, r = op.operands["x"], op.result
    if max(x.shape) <= ctx.target.vector_transpose_max:  # lowering is per target: its limit, not a copy
        return [ctx.op("nisa.nc_transpose", op, {"data": x}, {"engine": "vector"}, r)]
    out = []
    if x.tensor.type.buffer == Buffer.PSUM:  # the Tensor engine reads SBUF only
        staged = ctx.tile(op, x.shape, x.tensor.type.dtype)
        out.append(ctx.op("nisa.tensor_copy", op, {"src": x}, {}, staged, mask=None))
        x = full(staged)
    t = ctx.tile(op, r.type.shape, r.type.dtype, "psum")
    return out + [ctx.op("nisa.nc_transpose", op, {"data": x}, {"engine": "tensor"}, t),
                  ctx.op("nisa.tensor_copy", op, {"src": full(t)}, {}, r)]  # fmt: skip


def dropout(op: Op, ctx: RewriteContext) -> list:
    return [ctx.op("nisa.dropout", op, {"data": op.operands["x"], "prob": op.operands["rate"]}, {}, op.result)]


def copy(op: Op, ctx: RewriteContext) -> list:
    return [ctx.op("nisa.tensor_copy", op, {"src": op.operands["x"]}, {}, op.result)]


def _fill_value(t: Tensor, value) -> Imm:
    # nl.full stores the constant as the tile's dtype holds it; memset gets that value, so no second rounding
    return Imm(dtypes.held_value(t.type.dtype, value))


def _touches(stmt, t: Tensor) -> bool:
    """``stmt`` (an op, or a loop with any op in it) names ``t`` as an operand or result."""
    if isinstance(stmt, Loop):
        return any(_touches(s, t) for s in stmt.body)
    return stmt.result is t or any(isinstance(v, Access) and v.tensor is t for v in stmt.operands.values())


def _body_of(body: list, op: Op) -> tuple[list, int] | None:
    for k, stmt in enumerate(body):
        if stmt is op:
            return body, k
        if isinstance(stmt, Loop) and (found := _body_of(stmt.body, op)) is not None:
            return found
    return None


def _first_matmul_accumulation(op: Op, ctx: RewriteContext) -> tuple[Op, Loop] | None:
    """For ``acc = nl.zeros(psum)``: the ``acc += matmul`` that may start the accumulation instead, with the loop
    whose body holds it, or None.

    It is the first statement to touch ``acc`` after its zeros, directly in the body of a loop that runs at least
    once, and in the first iteration nothing before it touches ``acc``; it accumulates a whole unmasked matmul
    result into the whole unmasked tile, and that result has no other use, so the matmul itself writes ``acc``
    (the assign is fused). Then zeros + accumulate in iteration one is the matmul's value plus +0.0: what the
    Tensor engine's first matmul of a group writes (up to the sign of a zero: x + 0.0 is +0.0 for x = -0.0;
    the backends keep the add, so their outputs stay bit-identical to the traced kernel's)."""
    t = op.result
    value = op.attrs["value"]
    if (t.type.buffer != Buffer.PSUM or op.mask is not None or value != 0 or np.signbit(value)
            or (found := _body_of(ctx.kernel.body, op)) is None):  # fmt: skip
        return None
    body, k = found
    loop = next((s for s in body[k + 1:] if _touches(s, t)), None)
    if not isinstance(loop, Loop) or loop.trip_count < 1:
        return None
    j, acc = next(((j, s) for j, s in enumerate(loop.body) if _touches(s, t)), (0, None))
    if not (isinstance(acc, Op) and acc.name == "assign" and acc.mask is None and j > 0
            and acc.attrs.get("accumulate") == "add" and acc.operands["dst"].tensor is t and acc.operands["dst"].is_full
            and isinstance(src := acc.operands["src"], Access) and src.is_full and ctx.uses[src.tensor.name] == 1):
        return None  # fmt: skip
    mm = loop.body[j - 1]
    if not (isinstance(mm, Op) and mm.name in ("nl.matmul", "nisa.nc_matmul") and mm.result is src.tensor
            and mm.mask is None and tuple(src.shape) == tuple(t.type.shape)):  # fmt: skip
        return None
    return (acc, loop) if acc.attrs.get("zero_first", "") == "" else None


def fill(op: Op, ctx: RewriteContext) -> list:
    # The tensor stays an allocation (later writes may target it); a memset writes its initial value into it,
    # unless the PSUM accumulation that follows can start by overwriting it (no memset on the Vector engine).
    first = _first_matmul_accumulation(op, ctx)
    if first is not None:
        acc, loop = first
        acc.attrs["zero_first"] = loop.var
        return [_alloc(ctx, op, op.result)]
    t, value = op.result, _fill_value(op.result, op.attrs["value"])
    tile = ctx.tile(op, t.type.shape, t.type.dtype, par_axis=t.type.par_axis)  # a par_dim block keeps its layout
    write = ctx.op("assign", op, {"dst": full(t), "src": full(tile)}, {})
    if not t.type.buffer.on_chip:  # HBM: written by a DMA from the SBUF tile
        write = ctx.op("nisa.dma_copy", op, {"dst": full(t), "src": full(tile)})
    return [_alloc(ctx, op, t), ctx.op("nisa.memset", op, {"value": value}, {"shape": t.type.shape}, tile), write]


def broadcast_to(op: Op, ctx: RewriteContext) -> list:
    x, r = op.operands["x"], op.result
    src = broadcast_access(x, r.type.shape)
    if x.shape[0] == 1 and r.type.shape[0] != 1:  # across partitions: the DMA engines can gather one row 128 times
        return [_alloc(ctx, op, r), ctx.op("nisa.dma_copy", op, {"dst": full(r), "src": src})]
    return [ctx.op("nisa.tensor_copy", op, {"src": src}, {}, r)]


def expand_dims(op: Op, ctx: RewriteContext) -> list:
    x, r = op.operands["x"], op.result
    axis = op.attrs["axis"]
    inserted = set((axis,) if isinstance(axis, int) else axis)
    inserted = {a % len(r.type.shape) for a in inserted}
    kept = [k for k in range(len(r.type.shape)) if k not in inserted]  # result axis of each operand axis
    rename = {f"d{j}": f"d{k}" for j, k in enumerate(kept)}
    view = Access(x.tensor, tuple(e.rename(rename) for e in x.index), tuple(r.type.shape))
    return [ctx.op("nisa.tensor_copy", op, {"src": view}, {}, r)]


# Engines that write only some buffers: a fused destination must be one of them (Tensor engine -> PSUM only).
_WRITES = {"tensor": ("psum",)}


def _load_into(op: Op, ctx: RewriteContext) -> list | None:
    """``t[...] = nl.load(x)``: one DMA writing t's region, replacing the load's staging tile and its DMA (else a
    tensor_copy per load, and the staging tile's few rotating copies would cap how many DMAs run at once)."""
    dst, src, em = op.operands["dst"], op.operands["src"], ctx.emitted
    if len(em) < 2 or op.mask is not None or op.attrs.get("accumulate", "none") != "none" or not src.is_full:
        return None
    alloc, dma = em[-2], em[-1]
    if not (isinstance(dma, Op) and dma.name == "nisa.dma_copy" and dma.mask is None
            and dma.operands["dst"].tensor is src.tensor and isinstance(alloc, Op) and alloc.name == "alloc"
            and alloc.result is src.tensor and ctx.uses[src.tensor.name] == 1
            and dst.tensor.type.buffer == Buffer.SBUF and src.tensor.type.dtype == dst.tensor.type.dtype
            and tuple(src.shape) == tuple(dst.shape)):  # fmt: skip
        return None
    del em[-2:]
    moved = {k: v for k, v in dma.operands.items() if k != "dst"}  # src, and an indirect DMA's indices
    return [ctx.op("nisa.dma_copy", dma, {"dst": dst, **moved}, dict(dma.attrs), mask=None)]


def assign(op: Op, ctx: RewriteContext) -> list:
    dst, src = op.operands["dst"], op.operands["src"]
    if isinstance(src, Imm):
        tile = ctx.tile(op, dst.shape, dst.tensor.type.dtype, hint=dst.tensor.name)
        return [ctx.op("nisa.memset", op, {"value": src}, {"shape": dst.shape}, tile),
                ctx.op("assign", op, {"dst": dst, "src": full(tile)}, dict(op.attrs))]  # fmt: skip
    loaded = _load_into(op, ctx)
    if loaded is not None:
        return loaded
    prev = ctx.last_emitted()
    producer = prev if isinstance(prev, Op) and prev.result is src.tensor else None
    fusable = (producer is not None and ctx.uses[src.tensor.name] == 1 and src.is_full
               and dst.tensor.type.buffer.value in _WRITES.get(engine_of(producer) or "", ("sbuf", "psum")))
    if fusable:
        return [op]
    tile = ctx.tile(op, src.shape, src.tensor.type.dtype, hint=src.tensor.name)
    return [ctx.op("nisa.tensor_copy", op, {"src": src}, {}, tile, mask=op.mask),
            ctx.op("assign", op, {"dst": dst, "src": full(tile)}, dict(op.attrs))]  # fmt: skip


RULES = {
    "nl.load": load, "nl.store": store, "nl.load_transpose2d": load_transpose2d, "nl.matmul": matmul,
    "nl.transpose": transpose, "nl.copy": copy, "nl.full": fill, "nl.broadcast_to": broadcast_to,
    "nl.expand_dims": expand_dims, "assign": assign, "nl.where": select.where, "nl.dropout": dropout,
    **{f"nl.{f}": lower_math.unary for f in UNARY_NL},
    **{f"nl.{f}": lower_math.binary for f in BINARY_NL},
    **{f"nl.{n}": lower_math.reduce for n in REDUCTIONS},
}  # fmt: skip

LOWER_LANGUAGE = Pass("lower-language", RULES, doc=__doc__.split("\n\n")[0])

assert all(name in OPS for name in RULES), "a rule names an op missing from the op table"
