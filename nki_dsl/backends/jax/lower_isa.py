"""JAX lowering of ``nisa`` engine instructions, keyed by op name.

Engines compute in fp32 and each result is rounded to its dtype on write (``context``). Fused free-axis reductions
(``reduce_res``) reduce only the elements the op's mask keeps, and write the partitions the mask touches.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl import dtypes
from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import indirect, runtime
from nki_dsl.backends.jax.analysis import RNG
from nki_dsl.backends.jax.context import Lowered, OpContext
from nki_dsl.backends.jax.functions import BINARY, IDENTITY, REDUCTIONS, UNARY
from nki_dsl.backends.jax.lower_language import HIGHEST, reduction, uniform
from nki_dsl.ir import mx
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.indirect import hbm_operand

F32 = jnp.float32


def _per_partition(ctx: OpContext, name: str):
    """An immediate, or a ``[P, 1]`` tile as a column broadcasting along every free axis of the iteration space."""
    if ctx.is_imm(name):
        return ctx.read(name)
    col = ctx.read(name)
    ndim = len(ctx.shape)
    return col if ndim == 2 else col.reshape((-1,) + (1,) * (ndim - 1))


def _fp32(ctx: OpContext, name: str):
    x = ctx.read(name)
    if ctx.is_imm(name) or dtypes.get(ctx.dtype(name)).is_float:
        return x
    return jnp.asarray(x).astype(F32)


def _alu(fn: str, a, b, reverse: bool):
    return BINARY[fn](b, a) if reverse else BINARY[fn](a, b)


def _reduce_into(ctx: OpContext, value, reduce_op: str, cmd: str = "idle") -> None:
    """Reduce ``value`` (the instruction's fp32 output) along its free axes into the ``[P, 1]`` operand
    ``reduce_res``, as the accumulator registers do under ``cmd``."""
    identity = np.float32(IDENTITY[reduce_op])
    value = jnp.broadcast_to(value, ctx.shape)
    if ctx.mask is not None:  # positions the mask leaves out do not contribute
        value = jnp.where(ctx.mask.full(), value, identity)
    ndim = len(ctx.shape)
    reduced = REDUCTIONS[reduce_op](value, tuple(range(1, ndim)), False).reshape(-1, 1)
    if cmd == "reset":
        reduced = jnp.full_like(reduced, identity)
    elif cmd == "reduce":
        reduced = BINARY[reduce_op](ctx.read("reduce_res"), reduced)
    rows = ctx.mask.rows() if ctx.mask is not None else None
    ctx.write_operand("reduce_res", reduced, mask=rows)


# -- Tensor engine -----------------------------------------------------------------------------------------------


def nc_matmul(ctx: OpContext) -> Lowered:
    stationary, moving = ctx.read("stationary").astype(F32), ctx.read("moving").astype(F32)
    if ctx.op.attrs.get("perf_mode") == "double_row":
        # out[m, n] = sum_{k, r} stationary[k, r, m] * moving[k, r, n]: the row axis r joins the contraction.
        return Lowered(jnp.tensordot(stationary, moving, axes=([0, 1], [0, 1]), precision=HIGHEST))
    # out[m, n] = sum_k stationary[k, m] * moving[k, n], accumulated in fp32 as PSUM does.
    return Lowered(jnp.matmul(jnp.transpose(stationary), moving, precision=HIGHEST))


def _mx_operand(ctx: OpContext, data: str, scale: str):
    """The ``[4P, F]`` fp32 values of a packed MX operand times its scales (``nki_dsl.ir.mx``)."""
    return mx.scaled_operand(ctx.read(data), ctx.dtype(data), ctx.read(scale), ctx.dtype(scale) == "uint8", xp=jnp)


def nc_matmul_mx(ctx: OpContext) -> Lowered:
    # out[m, n] = sum_k A[k, m] * sA * B[k, n] * sB over the unpacked contraction k = 4p + j, in fp32 (PSUM).
    stationary = _mx_operand(ctx, "stationary", "stationary_scale")
    moving = _mx_operand(ctx, "moving", "moving_scale")
    return Lowered(jnp.matmul(jnp.transpose(stationary), moving, precision=HIGHEST))


def quantize_mx(ctx: OpContext) -> Lowered:
    scale = ctx.state.read(ctx.op.operands["dst_scale"])
    packed, scale = mx.quantize(ctx.read("src"), ctx.op.result.type.dtype, ctx.dtype("dst_scale") == "uint8", scale,
                                xp=jnp)  # fmt: skip
    ctx.write_operand("dst_scale", scale)
    return Lowered(packed)


def nc_transpose(ctx: OpContext) -> Lowered:
    return Lowered(jnp.transpose(ctx.read("data")))


# -- Scalar engine -----------------------------------------------------------------------------------------------


def activation(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    x = _fp32(ctx, "data")
    scale = ctx.op.operands["scale"]
    if not (ctx.is_imm("scale") and scale.value == 1):
        x = x * _per_partition(ctx, "scale")
    if ctx.has("bias"):
        x = x + _per_partition(ctx, "bias")
    out = UNARY[attrs["op"]](x)
    if ctx.has("reduce_res"):
        _reduce_into(ctx, out, attrs["reduce_op"], attrs.get("reduce_cmd", "idle"))
    return Lowered(out)


# -- Vector engine -----------------------------------------------------------------------------------------------


def tensor_tensor(ctx: OpContext) -> Lowered:
    return Lowered(BINARY[ctx.op.attrs["op"]](ctx.read("data1"), ctx.read("data2")))


def tensor_scalar(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    value = _alu(attrs["op0"], ctx.read("data"), _per_partition(ctx, "operand0"), attrs["reverse0"])
    if attrs["op1"] != "none":
        value = _alu(attrs["op1"], value, _per_partition(ctx, "operand1"), attrs["reverse1"])
    return Lowered(value)


def tensor_scalar_reduce(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    out = _alu(attrs["op0"], _fp32(ctx, "data"), _per_partition(ctx, "operand0"), attrs["reverse0"])
    _reduce_into(ctx, out, attrs["reduce_op"])
    return Lowered(out)


def scalar_tensor_tensor(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    first = _alu(attrs["op0"], ctx.read("data"), _per_partition(ctx, "operand0"), attrs["reverse0"])
    return Lowered(_alu(attrs["op1"], first, ctx.read("operand1"), attrs["reverse1"]))


def tensor_tensor_scan(ctx: OpContext) -> Lowered:
    """r[:, j] = (data0[:, j] op0 r[:, j-1]) op1 data1[:, j] along the flattened free axes, carried in fp32."""
    attrs = ctx.op.attrs
    a, b = jnp.asarray(ctx.read("data0")), jnp.asarray(ctx.read("data1"))
    shape = ctx.shape
    a = jnp.broadcast_to(a, shape).astype(F32).reshape(shape[0], -1)
    b = jnp.broadcast_to(b, shape).astype(F32).reshape(shape[0], -1)
    init = jnp.asarray(ctx.read("initial"), F32).reshape(-1)
    prev = jnp.broadcast_to(init, (shape[0],))
    op0, op1 = BINARY[attrs["op0"]], BINARY[attrs["op1"]]
    # Under a mask the scan runs over the columns its per-axis conditions select only (the NumPy reference's
    # bounding box), starting from ``initial`` at the first of them: other columns pass the carry through.
    cols = jnp.ones(shape[1:], bool)
    if ctx.mask is not None:
        for axis, cond in ctx.mask.single.items():
            if axis > 0:
                view = [1] * (len(shape) - 1)
                view[axis - 1] = shape[axis]
                cols = cols & cond.reshape(view)
    cols = cols.reshape(-1)

    def step(prev, column):
        x_a, x_b, selected = column
        x = op0(prev, x_a) if attrs["reverse0"] else op0(x_a, prev)
        new = (op1(x_b, x) if attrs["reverse1"] else op1(x, x_b)).astype(F32)
        new = jnp.where(selected, new, prev)
        return new, new

    _, out = lax.scan(step, prev, (a.T, b.T, cols))
    return Lowered(out.T.reshape(shape))


def tensor_copy(ctx: OpContext) -> Lowered:
    if ctx.op.attrs.get("view_bytes"):  # a bit-cast (ir/bitcast.py)
        src = ctx.op.operands["src"].tensor.type.dtype
        return Lowered(runtime.bitcast(ctx.read("src"), src, ctx.op.result.type.dtype))
    return Lowered(ctx.read("src"))


def tensor_copy_predicated(ctx: OpContext) -> Lowered:
    pred = jnp.asarray(ctx.read("predicate"))
    pred = pred != 0 if pred.dtype != jnp.bool_ else pred  # nonzero (NaN included) selects, as np.where does
    src, dst = ctx.read("src"), ctx.read("dst")
    value = jnp.where(pred, dst, src) if ctx.op.attrs["reverse_pred"] else jnp.where(pred, src, dst)
    return Lowered(writes=[("dst", value, "none")])


def dropout(ctx: OpContext) -> Lowered:
    keep = uniform(ctx, ctx.shape) >= ctx.read("prob")
    return Lowered(jnp.where(keep, ctx.read("data"), F32(0.0)))


def rng(ctx: OpContext) -> Lowered:
    """Random 32-bit words from the launch's generator (JAX's stream), truncated to the dtype's low bits."""
    key, sub = jax.random.split(ctx.state.env[RNG])
    ctx.state.env[RNG] = key
    words = jax.random.bits(sub, tuple(ctx.shape), jnp.uint32)
    d = dtypes.get(ctx.op.result.type.dtype)
    low = words.astype(np.dtype(f"u{d.itemsize}"))  # an unsigned narrowing cast keeps the low bits
    return Lowered(low if low.dtype == d.np_dtype else lax.bitcast_convert_type(low, d.np_dtype))


def rand2(ctx: OpContext) -> Lowered:
    low, high = _per_partition(ctx, "min"), _per_partition(ctx, "max")
    return Lowered(low + (jnp.asarray(high, F32) - low) * uniform(ctx, ctx.shape))


def set_rng_seed(ctx: OpContext) -> Lowered:
    seed = jnp.asarray(ctx.read("src_seeds")).reshape(-1)[0]
    ctx.state.env[RNG] = jax.random.key(seed.astype(jnp.uint32))
    return Lowered()


def reciprocal(ctx: OpContext) -> Lowered:
    return Lowered(F32(1.0) / _fp32(ctx, "data"))


def memset(ctx: OpContext) -> Lowered:
    return Lowered(jnp.full(ctx.shape, ctx.read("value")))


def tensor_reduce(ctx: OpContext) -> Lowered:
    value = reduction(ctx, "data", ctx.op.attrs["op"])
    return Lowered(jnp.negative(value) if ctx.op.attrs["negate"] else value)


def _bn_stats(x, keep=None):
    """``[P, 6]``: (count, mean, count * var) of the even-indexed, then the odd-indexed free elements; with
    ``keep`` (a boolean array over ``x``, the op's ``reduce_mask``) only of the elements it keeps."""
    x = x.astype(F32).reshape(x.shape[0], -1)
    keep = jnp.ones(x.shape, bool) if keep is None else jnp.broadcast_to(keep, x.shape).reshape(x.shape)
    cols = []
    for part, ok in ((x[:, 0::2], keep[:, 0::2]), (x[:, 1::2], keep[:, 1::2])):
        if part.shape[1] == 0:
            cols += [jnp.zeros((x.shape[0],), F32)] * 3
            continue
        n = ok.sum(axis=1).astype(F32)
        mean = jnp.where(ok, part, F32(0)).sum(axis=1, dtype=F32) / jnp.maximum(n, F32(1))
        m2 = jnp.where(ok, jnp.square(part - mean[:, None]), F32(0)).sum(axis=1, dtype=F32)
        cols += [n, mean, m2]
    return jnp.stack(cols, axis=1)


def _bn_aggr(x):
    """``[P, 2]`` mean and population variance from (count, mean, M2) triples, combined in fp32 (Chan et al.)."""
    g = x.astype(F32).reshape(x.shape[0], -1, 3)
    count, mean, m2 = g[..., 0], g[..., 1], g[..., 2]
    total = count.sum(axis=1, dtype=F32)
    mu = (count * mean).sum(axis=1, dtype=F32) / total
    var = (m2 + count * jnp.square(mean - mu[:, None])).sum(axis=1, dtype=F32) / total
    return jnp.stack([mu, var], axis=1)


def bn_stats(ctx: OpContext) -> Lowered:
    data = ctx.read("data")
    return Lowered(_bn_stats(data, ctx.reduced_valid("data")))


def bn_aggr(ctx: OpContext) -> Lowered:
    return Lowered(_bn_aggr(ctx.read("data")))


# -- GpSimd engine -----------------------------------------------------------------------------------------------


def tensor_partition_reduce(ctx: OpContext) -> Lowered:
    return Lowered(REDUCTIONS[ctx.op.attrs["op"]](ctx.read("data"), (0,), True))


def _index_values(ctx: OpContext, expr: Affine):
    """``expr`` evaluated at every position of the result (axes ``d<k>``), as an int32 array."""
    axes = {var_number(v): c for v, c in expr.terms if var_kind(v) == "axis"}
    rest = Affine(tuple((v, c) for v, c in expr.terms if var_kind(v) != "axis"), expr.const)
    grid = acc.axis_values(axes, ctx.shape)
    base = jnp.asarray(acc.value_of(rest, ctx.ivars), jnp.int32)
    return jnp.broadcast_to(base if grid is None else grid + base, ctx.shape)


def iota(ctx: OpContext) -> Lowered:
    return Lowered(_index_values(ctx, ctx.op.attrs["expr"]))  # int32 on GpSimd; converted to the result dtype


def affine_select(ctx: OpContext) -> Lowered:
    pred = jnp.ones(ctx.shape, bool)
    for c in ctx.op.attrs["pred"].constraints:
        pred = pred & (_index_values(ctx, c) >= 0)
    return Lowered(jnp.where(pred, ctx.read("on_true_tile"), ctx.read("on_false_value")))


# -- DMA ---------------------------------------------------------------------------------------------------------


def dma_copy(ctx: OpContext) -> Lowered:
    side = hbm_operand(ctx.op)
    if side is not None:  # an indirect DMA: a gather (src in HBM) or a scatter (dst)
        return indirect.lower(ctx, side)
    return Lowered(writes=[("dst", ctx.read("src"), ctx.op.attrs["dst_rmw_op"])])


def dma_transpose(ctx: OpContext) -> Lowered:
    return Lowered(jnp.transpose(ctx.read("src"), tuple(ctx.op.attrs["axes"])))


ISA_HANDLERS = {
    "nisa.nc_matmul": nc_matmul,
    "nisa.nc_matmul_mx": nc_matmul_mx,
    "nisa.quantize_mx": quantize_mx,
    "nisa.nc_transpose": nc_transpose,
    "nisa.activation": activation,
    "nisa.activation_reduce": activation,
    "nisa.tensor_tensor": tensor_tensor,
    "nisa.tensor_scalar": tensor_scalar,
    "nisa.tensor_scalar_reduce": tensor_scalar_reduce,
    "nisa.scalar_tensor_tensor": scalar_tensor_tensor,
    "nisa.tensor_tensor_scan": tensor_tensor_scan,
    "nisa.tensor_copy": tensor_copy,
    "nisa.tensor_copy_predicated": tensor_copy_predicated,
    "nisa.dropout": dropout,
    "nisa.reciprocal": reciprocal,
    "nisa.rng": rng,
    "nisa.rand2": rand2,
    "nisa.set_rng_seed": set_rng_seed,
    "nisa.memset": memset,
    "nisa.tensor_reduce": tensor_reduce,
    "nisa.bn_stats": bn_stats,
    "nisa.bn_aggr": bn_aggr,
    "nisa.tensor_partition_reduce": tensor_partition_reduce,
    "nisa.iota": iota,
    "nisa.affine_select": affine_select,
    "nisa.dma_copy": dma_copy,
    "nisa.dma_transpose": dma_transpose,
}
