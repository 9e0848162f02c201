"""Lowering rules for ``nl`` elementwise math and reductions (reference/nki.md §2.3-§2.4):

* unary functions the Scalar engine implements -> ``nisa.activation`` (float tiles; ScalarE computes in fp32);
  the rest, and integer tiles, -> Vector ALU instructions (``tensor_scalar``/``tensor_tensor``/
  ``scalar_tensor_tensor``) whose NumPy results are bit-identical to the ``nl`` op's. ``cos``/``tan`` have no
  instruction: they go through ``sin`` (``cos x = sin(x + pi/2)``), exact only to fp32 rounding of ``x + pi/2``;
* binary ops -> ``nisa.tensor_scalar`` when one side is an immediate or a ``[P, 1]`` column (one value per
  partition, the Vector engine's scalar operand), else ``nisa.tensor_tensor``;
* reductions -> ``nisa.tensor_reduce``; ``mean`` and ``var`` as the sum(s) and divisions NumPy itself does.
"""

from __future__ import annotations

import math

from nki_dsl import dtypes
from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.ops.isa import ACTIVATIONS
from nki_dsl.ir.ops.shapes import normalize_axes
from nki_dsl.passes.rewrite import RewriteContext, full

F32 = "float32"
HALF_PI = math.pi / 2


def _dtype(a: Access) -> dtypes.DType:
    return dtypes.get(a.tensor.type.dtype)


def _column(col, data, shape) -> bool:
    """Is ``col`` a ``[P, 1]`` tile that a Vector instruction over ``data`` (of the result's shape) takes as its
    per-partition scalar operand?"""
    return (isinstance(col, Access) and isinstance(data, Access) and len(col.shape) == 2 and col.shape[1] == 1
            and tuple(data.shape) == tuple(shape) and len(shape) >= 2 and data.shape[0] == col.shape[0])  # fmt: skip


def alu(ctx: RewriteContext, like: Op, fn: str, x, y, result, mask="inherit") -> Op:
    """``fn(x, y)`` as one Vector instruction writing ``result``; x, y are accesses or immediates."""
    shape = result.type.shape
    if isinstance(y, Imm) or _column(y, x, shape):
        return ctx.op("nisa.tensor_scalar", like, {"data": x, "operand0": y}, {"op0": fn}, result, mask)
    if isinstance(x, Imm) or _column(x, y, shape):
        return ctx.op("nisa.tensor_scalar", like, {"data": y, "operand0": x}, {"op0": fn, "reverse0": True}, result,
                      mask)  # fmt: skip
    return ctx.op("nisa.tensor_tensor", like, {"data1": x, "data2": y}, {"op": fn}, result, mask)


def binary(op: Op, ctx: RewriteContext) -> list:
    return [alu(ctx, op, OPS[op.name].fn, op.operands["x"], op.operands["y"], op.result)]


def _activation(ctx, like, fn, data, result) -> Op:
    return ctx.op("nisa.activation", like, {"data": data, "scale": Imm(1.0)}, {"op": fn}, result)


def _minus_one(a: Access) -> Imm:
    """-1 in ``a``'s dtype. An unsigned tile has none: all bits set (2**n - 1, which is -1 modulo 2**n), so that
    x * it is -x wrapped around, as NumPy's and JAX's integer negation (a bare -1 does not fit the operand's dtype)."""
    dt = _dtype(a)
    if dt.is_float:
        return Imm(-1.0)
    return Imm((1 << (8 * dt.itemsize)) - 1) if dt.name.startswith("uint") else Imm(-1)


def unary(op: Op, ctx: RewriteContext) -> list:
    fn = OPS[op.name].fn
    x, r = op.operands["x"], op.result
    is_float = _dtype(x).is_float
    if fn in INTEGER_FORMS and not is_float:
        return INTEGER_FORMS[fn](op, ctx, x, r)
    if fn in ACTIVATIONS:
        return [_activation(ctx, op, fn, x, r)]
    return VECTOR_FORMS[fn](op, ctx, x, r)


def _tmp(ctx, op, dtype=None, shape=None):
    return ctx.tile(op, shape or op.result.type.shape, dtype or op.result.type.dtype)


# -- unary functions without an activation: Vector ALU compositions, bit-identical to NumPy ----------------------


def _negative(op, ctx, x, r):
    return [alu(ctx, op, "multiply", x, _minus_one(x), r)]


def _logical_not(op, ctx, x, r):
    return [alu(ctx, op, "equal", x, Imm(0), r)]


def _invert(op, ctx, x, r):
    dt = _dtype(x)
    if dt.name == "bool_":
        return [alu(ctx, op, "logical_xor", x, Imm(True), r)]
    ones = -1 if dt.name.startswith("int") else (1 << (8 * dt.itemsize)) - 1  # all bits set
    return [alu(ctx, op, "bitwise_xor", x, Imm(ones), r)]


def _minus_remainder(fn: str):
    """floor(x) = x - mod(x, 1) and trunc(x) = x - fmod(x, 1): the remainder is exact, and so is the subtraction
    (the result is x with its fraction bits cleared), in one scalar_tensor_tensor."""

    def rule(op, ctx, x, r):
        return [ctx.op("nisa.scalar_tensor_tensor", op, {"data": x, "operand0": Imm(1.0), "operand1": x},
                       {"op0": fn, "op1": "subtract", "reverse1": True}, r)]  # fmt: skip

    return rule


def _ceil(op, ctx, x, r):
    # ceil(x) = -floor(-x) = x + mod(-x, 1); rounding is symmetric, so this equals np.ceil exactly
    neg = _tmp(ctx, op, x.tensor.type.dtype)
    return [alu(ctx, op, "multiply", x, _minus_one(x), neg),
            ctx.op("nisa.scalar_tensor_tensor", op, {"data": full(neg), "operand0": Imm(1.0), "operand1": x},
                   {"op0": "mod", "op1": "add"}, r)]  # fmt: skip


def _cos(op, ctx, x, r):
    shifted = _tmp(ctx, op, F32)
    return [alu(ctx, op, "add", x, Imm(HALF_PI), shifted), _activation(ctx, op, "sin", full(shifted), r)]


def _tan(op, ctx, x, r):
    sin, shifted, cos = _tmp(ctx, op, F32), _tmp(ctx, op, F32), _tmp(ctx, op, F32)
    return [_activation(ctx, op, "sin", x, sin), alu(ctx, op, "add", x, Imm(HALF_PI), shifted),
            _activation(ctx, op, "sin", full(shifted), cos), alu(ctx, op, "divide", full(sin), full(cos), r)]


VECTOR_FORMS = {
    "negative": _negative, "logical_not": _logical_not, "invert": _invert, "floor": _minus_remainder("mod"),
    "trunc": _minus_remainder("fmod"), "ceil": _ceil, "cos": _cos, "tan": _tan,
}  # fmt: skip


# -- integer tiles: the Scalar engine computes in fp32, which would round large integers; use the Vector ALU ----


def _int_relu(op, ctx, x, r):
    return [alu(ctx, op, "maximum", x, Imm(0), r)]


def _int_square(op, ctx, x, r):
    return [alu(ctx, op, "multiply", x, x, r)]


def _int_abs(op, ctx, x, r):
    if _dtype(x).name.startswith("uint"):  # |x| = x: a copy (max with 0), not max(x, -x) with -x wrapped around
        return [alu(ctx, op, "maximum", x, Imm(0), r)]
    neg = _tmp(ctx, op)
    return [alu(ctx, op, "multiply", x, Imm(-1), neg), alu(ctx, op, "maximum", x, full(neg), r)]


def _int_sign(op, ctx, x, r):
    pos, neg = _tmp(ctx, op), _tmp(ctx, op)
    return [alu(ctx, op, "greater", x, Imm(0), pos), alu(ctx, op, "less", x, Imm(0), neg),
            alu(ctx, op, "subtract", full(pos), full(neg), r)]  # fmt: skip


INTEGER_FORMS = {"relu": _int_relu, "square": _int_square, "abs": _int_abs, "sign": _int_sign}


# -- reductions ----------------------------------------------------------------------------------------------------


def reduce(op: Op, ctx: RewriteContext) -> list:
    fn = OPS[op.name].fn
    x, r = op.operands["x"], op.result
    if fn in REDUCE_FORMS:
        return REDUCE_FORMS[fn](op, ctx, x, r)
    return [_tensor_reduce(ctx, op, fn, x, op.attrs["axis"], op.attrs["keepdims"], r)]


def _tensor_reduce(ctx, op, fn, x, axis, keepdims, result):
    attrs = {"op": fn, "axis": tuple(axis), "keepdims": keepdims}
    if "reduce_mask" in op.attrs:  # over x's axes, which data keeps
        attrs["reduce_mask"] = op.attrs["reduce_mask"]
    return ctx.op("nisa.tensor_reduce", op, {"data": x}, attrs, result)


def _count(x: Access, axis) -> float:
    return float(math.prod(x.shape[a] for a in normalize_axes(axis, len(x.shape))))


def _mean(op, ctx, x, r):
    # np.mean: the fp32 sum, then a true division by the element count
    total = _tmp(ctx, op, F32)
    return [_tensor_reduce(ctx, op, "add", x, op.attrs["axis"], op.attrs["keepdims"], total),
            alu(ctx, op, "divide", full(total), Imm(_count(x, op.attrs["axis"])), r)]


def _var(op, ctx, x, r):
    # np.var: mean with kept axes, x - mean, its square, the sum of squares, divided by the count
    axis, n = op.attrs["axis"], Imm(_count(x, op.attrs["axis"]))
    reduced = normalize_axes(axis, len(x.shape))
    kept = tuple(1 if k in reduced else s for k, s in enumerate(x.shape))
    inner = _over_input_axes(op, reduced, len(x.shape))  # the steps before the last reduction span x's rank
    total, mean = _tmp(ctx, op, F32, kept), _tmp(ctx, op, F32, kept)
    centered, square, sq_total = _tmp(ctx, op, F32, x.shape), _tmp(ctx, op, F32, x.shape), _tmp(ctx, op, F32)
    steps = [ctx.op("nisa.tensor_reduce", op, {"data": x}, {"op": "add", "axis": tuple(axis), "keepdims": True},
                    total, inner),
             alu(ctx, op, "divide", full(total), n, mean, inner),
             alu(ctx, op, "subtract", x, full(mean), centered, inner),
             alu(ctx, op, "multiply", full(centered), full(centered), square, inner),
             _tensor_reduce(ctx, op, "add", full(square), axis, op.attrs["keepdims"], sq_total),
             alu(ctx, op, "divide", full(sq_total), n, r)]  # fmt: skip
    return steps


def _over_input_axes(op: Op, reduced, rank: int):
    """A reduction's mask (over its result's axes, constraining kept axes only: the tracer refuses a mask on a
    reduced axis of ``var``) renamed onto its input's axes, for the steps that keep every input axis. With
    ``keepdims`` the axes already line up; without, result axis ``j`` is the ``j``-th kept input axis."""
    if op.mask is None or op.attrs["keepdims"]:
        return op.mask
    kept_axes = [k for k in range(rank) if k not in reduced]
    return op.mask.rename({f"d{j}": f"d{k}" for j, k in enumerate(kept_axes)})


REDUCE_FORMS = {"mean": _mean, "var": _var}
