"""NumPy lowering of ``nisa`` engine instructions, keyed by op name.

Engines compute in fp32 and the framework rounds each result to its dtype on write (``runtime``). Under a mask,
operands are read cut to the mask's box along the iteration axes they correspond to (``ctx.read(axes=...)``);
values built over whole iteration axes (index patterns, statistics) are cut afterwards. Helpers the generated
code calls are registered as constants of the generated module.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.backends.numpy_ref import indirect
from nki_dsl.backends.numpy_ref.access_code import affine_code
from nki_dsl.backends.numpy_ref.emitter import Lowered, OpContext, number_literal
from nki_dsl.backends.numpy_ref.functions import BINARY_TEMPLATES, REDUCTIONS, UNARY_TEMPLATES, matmul32
from nki_dsl.backends.numpy_ref.lower_language import TRANSPOSED, reduction
from nki_dsl.backends.numpy_ref.masked import embed
from nki_dsl.ir import mx
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.nodes import Access, Imm
from nki_dsl.ir.source_safe import py_int

F32 = np.float32
# The value an accumulator register resets to, per reduction.
IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


# -- reading operands --------------------------------------------------------------------------------------------

PARTITION = {0: 0}  # iteration axis -> operand axis, for operands that share only the partition axis


def _cut(ctx: OpContext, value: str, done=()) -> str:
    """``value``, computed over whole iteration axes, cut to the mask's box (except the axes in ``done``, which
    the operand reads already cut)."""
    cut = [a for a in ctx.box if a not in done]
    if not cut:
        return value
    slices = ", ".join(f"{ctx.box[a][0]}:{ctx.box[a][1]}" if a in cut else ":" for a in range(len(ctx.shape)))
    return f"({value})[{slices}]"


def _per_partition(ctx: OpContext, name: str) -> str:
    """An immediate, or a ``[P, 1]`` tile as a column broadcasting along every free axis of the iteration space."""
    if isinstance(ctx.op.operands[name], Imm):
        return ctx.read(name)
    col = ctx.read(name, axes=PARTITION)
    ndim = len(ctx.shape)
    return col if ndim == 2 else f"{col}.reshape((-1,{' 1,' * (ndim - 1)}))"


def _fp32(ctx: OpContext, name: str) -> str:
    """A tile read (cut to the box) as fp32: integer tiles are converted; float tiles already hold fp32 values."""
    x = ctx.read(name)
    if isinstance(ctx.op.operands[name], Imm) or dtypes.get(ctx.dtype(name)).is_float:
        return x
    return f"np.asarray({x}, dtype=np.float32)"


def _alu(fn: str, a: str, b: str, reverse: bool) -> str:
    return BINARY_TEMPLATES[fn].format(b, a) if reverse else BINARY_TEMPLATES[fn].format(a, b)


def _bind(ctx: OpContext, expr: str) -> str:
    """Evaluate ``expr`` once into a temporary (templates may use their operand several times)."""
    tmp = ctx.e.tmp()
    ctx.e.line(f"{tmp} = {expr}")
    return tmp


# -- fused free-axis reductions into reduce_res --------------------------------------------------------------------


def _reduce_into(ctx: OpContext, value: str, reduce_op: str, cmd: str = "idle") -> None:
    """Reduce ``value`` (the instruction's fp32 output over the box) along its free axes and write it into the
    ``[P, 1]`` operand ``reduce_res``, as the accumulator registers do under ``cmd``."""
    identity = f"np.float32({number_literal(IDENTITY[reduce_op])})"
    if ctx.residual:  # positions the mask leaves out do not contribute
        value = f"np.where({ctx.residual}, {value}, {identity})"
    ndim = len(ctx.shape)
    reduced = f"{REDUCTIONS[reduce_op]}({value}, axis={tuple(range(1, ndim))}).reshape((-1, 1))"
    access: Access = ctx.op.operands["reduce_res"]
    code = ctx.code(access, axes=PARTITION)
    if cmd == "reset":
        reduced = f"np.full_like({reduced}, {identity})"
    elif cmd == "reduce":
        reduced = BINARY_TEMPLATES[reduce_op].format(code.read, reduced)
    ctx.e.line(code.write(f"ROUND[{access.tensor.type.dtype!r}]({reduced})"))


# -- Tensor engine -----------------------------------------------------------------------------------------------


def nc_matmul(ctx: OpContext) -> Lowered:
    if ctx.op.attrs.get("perf_mode") == "double_row":
        # out[m, n] = sum_{k, r} stationary[k, r, m] * moving[k, r, n]: the row axis r (2) joins the contraction.
        stationary, moving = ctx.read("stationary", axes={0: 2}), ctx.read("moving", axes={1: 2})
        return Lowered(f"np.tensordot(np.asarray({stationary}, dtype=np.float32), {moving}, axes=([0, 1], [0, 1]))")
    # out[m, n] = sum_k stationary[k, m] * moving[k, n]: result axis 0 is stationary's axis 1, axis 1 moving's.
    stationary, moving = ctx.read("stationary", axes={0: 1}), ctx.read("moving", axes={1: 1})
    # Operands hold fp32 values rounded to their dtype; the product accumulates in fp32, as PSUM does. The
    # transposed operand is made contiguous first (OpenBLAS is slow on small transposed GEMMs).
    return Lowered(f"{ctx.e.const(matmul32)}(np.ascontiguousarray({stationary}.T, dtype=np.float32), {moving})")


def _mx_operand(ctx: OpContext, data: str, scale: str) -> str:
    """The ``[4P, F]`` fp32 values of a packed MX operand times its scales (``nki_dsl.ir.mx``)."""
    raw_scale = ctx.dtype(scale) == "uint8"
    return (f"{ctx.e.const(mx.scaled_operand)}({ctx.read(data, axes=None)}, {ctx.dtype(data)!r}, "
            f"{ctx.read(scale, axes=None)}, {raw_scale})")


def nc_matmul_mx(ctx: OpContext) -> Lowered:
    # out[m, n] = sum_k A[k, m] * sA * B[k, n] * sB over the unpacked contraction k = 4p + j, in fp32 (PSUM).
    stationary = _mx_operand(ctx, "stationary", "stationary_scale")
    moving = _mx_operand(ctx, "moving", "moving_scale")
    return Lowered(f"np.matmul(np.ascontiguousarray({stationary}.T), {moving})")


def quantize_mx(ctx: OpContext) -> Lowered:
    access: Access = ctx.op.operands["dst_scale"]
    code = ctx.code(access, axes=None)
    out = _bind(ctx, f"{ctx.e.const(mx.quantize)}({ctx.read('src', axes=None)}, {ctx.result_dtype!r}, "
                     f"{ctx.dtype('dst_scale') == 'uint8'}, {code.read})")  # fmt: skip
    ctx.e.line(code.write(f"ROUND[{access.tensor.type.dtype!r}]({out}[1])"))
    return Lowered(f"{out}[0]")


def nc_transpose(ctx: OpContext) -> Lowered:
    return Lowered(f"{ctx.read('data', axes=TRANSPOSED)}.T", fresh=False)


# -- Scalar engine -----------------------------------------------------------------------------------------------


def activation(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    x = _fp32(ctx, "data")
    scale = ctx.op.operands["scale"]
    if not (isinstance(scale, Imm) and scale.value == 1):
        x = f"{x} * {_per_partition(ctx, 'scale')}"
    if ctx.has("bias"):
        x = f"{x} + {_per_partition(ctx, 'bias')}"
    out = _bind(ctx, UNARY_TEMPLATES[attrs["op"]].format(_bind(ctx, x)))
    if ctx.has("reduce_res"):
        _reduce_into(ctx, out, attrs["reduce_op"], attrs.get("reduce_cmd", "idle"))
    return Lowered(out, fresh=attrs["op"] != "copy")  # a copy may be a view of data


# -- Vector engine -----------------------------------------------------------------------------------------------


def tensor_tensor(ctx: OpContext) -> Lowered:
    return Lowered(BINARY_TEMPLATES[ctx.op.attrs["op"]].format(ctx.read("data1"), ctx.read("data2")))


def tensor_scalar(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    value = _alu(attrs["op0"], ctx.read("data"), _per_partition(ctx, "operand0"), attrs["reverse0"])
    if attrs["op1"] != "none":
        value = _alu(attrs["op1"], value, _per_partition(ctx, "operand1"), attrs["reverse1"])
    return Lowered(value)


def tensor_scalar_reduce(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    out = _bind(ctx, _alu(attrs["op0"], _fp32(ctx, "data"), _per_partition(ctx, "operand0"), attrs["reverse0"]))
    _reduce_into(ctx, out, attrs["reduce_op"])
    return Lowered(out)


def scalar_tensor_tensor(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    first = _alu(attrs["op0"], ctx.read("data"), _per_partition(ctx, "operand0"), attrs["reverse0"])
    return Lowered(_alu(attrs["op1"], first, ctx.read("operand1"), attrs["reverse1"]))


def _scan(data0, data1, initial, op0, op1, reverse0: bool, reverse1: bool) -> np.ndarray:
    """The scan of ``tensor_tensor_scan`` along the flattened free axes of each partition, carried in fp32."""
    shape = np.shape(data0)
    a = np.asarray(data0, dtype=F32).reshape(shape[0], -1)
    b = np.asarray(data1, dtype=F32).reshape(shape[0], -1)
    prev = np.broadcast_to(np.asarray(initial, dtype=F32).reshape(-1), (a.shape[0],))
    out = np.empty(a.shape, dtype=F32)
    for j in range(a.shape[1]):
        x = op0(prev, a[:, j]) if reverse0 else op0(a[:, j], prev)
        prev = np.asarray(op1(b[:, j], x) if reverse1 else op1(x, b[:, j]), dtype=F32)
        out[:, j] = prev
    return out.reshape(shape)


def _lambda(fn: str) -> str:
    return f"(lambda _a, _b: {BINARY_TEMPLATES[fn].format('_a', '_b')})"


def tensor_tensor_scan(ctx: OpContext) -> Lowered:
    attrs = ctx.op.attrs
    init = ctx.read("initial") if isinstance(ctx.op.operands["initial"], Imm) else ctx.read("initial", axes=PARTITION)
    args = [ctx.read("data0"), ctx.read("data1"), init, _lambda(attrs["op0"]), _lambda(attrs["op1"]),
            repr(attrs["reverse0"]), repr(attrs["reverse1"])]  # fmt: skip
    return Lowered(f"{ctx.e.const(_scan)}({', '.join(args)})")


def tensor_copy(ctx: OpContext) -> Lowered:
    if ctx.op.attrs.get("view_bytes"):  # a bit-cast (ir/bitcast.py); dtype names are checked IR values
        src, dst = ctx.dtype("src"), ctx.result_dtype
        return Lowered(f"BITCAST({ctx.read('src', axes=None)}, {ctx.e.const(src)}, {ctx.e.const(dst)})")
    return Lowered(ctx.read("src"), fresh=False)


def tensor_copy_predicated(ctx: OpContext) -> Lowered:
    pred = ctx.read("predicate")  # nonzero (NaN included) selects, as np.where's condition
    src, dst = ctx.read("src"), ctx.read("dst")
    value = f"np.where({pred}, {dst}, {src})" if ctx.op.attrs["reverse_pred"] else f"np.where({pred}, {src}, {dst})"
    return Lowered(writes=[("dst", value, "none")])


def dropout(ctx: OpContext) -> Lowered:
    # The same draw as nl.dropout (one uniform per element of the box, kept where >= prob), so lowering is exact.
    keep = f"(rng.uniform({ctx.box_shape()}) >= {ctx.read('prob')})"
    return Lowered(f"np.where({keep}, {ctx.read('data')}, np.float32(0.0))")


def rng(ctx: OpContext) -> Lowered:
    return Lowered(f"rng.bits({ctx.box_shape()}, {ctx.result_dtype!r})")


def rand2(ctx: OpContext) -> Lowered:
    low, high = _per_partition(ctx, "min"), _per_partition(ctx, "max")
    return Lowered(f"({low} + (np.float32({high}) - {low}) * rng.uniform({ctx.box_shape()}))")


def set_rng_seed(ctx: OpContext) -> Lowered:
    ctx.e.line(f"rng.seed({ctx.read('src_seeds', axes=None)})")
    return Lowered()


def reciprocal(ctx: OpContext) -> Lowered:
    return Lowered(f"(np.float32(1.0) / {_fp32(ctx, 'data')})")


def memset(ctx: OpContext) -> Lowered:
    return Lowered(f"np.full({ctx.box_shape()}, {ctx.read('value')})")


def tensor_reduce(ctx: OpContext) -> Lowered:
    value = reduction(ctx, "data", ctx.op.attrs["op"])
    return Lowered(f"np.negative({value})" if ctx.op.attrs["negate"] else value)


def _bn_stats(data) -> np.ndarray:
    """``[P, 6]``: (count, mean, count * var) of the even-indexed, then the odd-indexed free elements."""
    x = np.asarray(data, dtype=F32).reshape(np.shape(data)[0], -1)
    out = np.zeros((x.shape[0], 6), dtype=F32)
    for k, part in enumerate((x[:, 0::2], x[:, 1::2])):
        n = part.shape[1]
        if n == 0:
            continue
        mean = part.sum(axis=1, dtype=F32) / F32(n)
        out[:, 3 * k] = n
        out[:, 3 * k + 1] = mean
        out[:, 3 * k + 2] = np.square(part - mean[:, None]).sum(axis=1, dtype=F32)
    return out


def _bn_stats_masked(data, keep) -> np.ndarray:
    """``_bn_stats`` counting only the elements where ``keep`` holds (parity by position in the access); a
    partition with no element of a parity gets (0, 0, 0) for it."""
    x = np.asarray(data, dtype=F32).reshape(np.shape(data)[0], -1)
    keep = np.asarray(keep).reshape(x.shape)
    out = np.zeros((x.shape[0], 6), dtype=F32)
    for k, (part, ok) in enumerate(((x[:, 0::2], keep[:, 0::2]), (x[:, 1::2], keep[:, 1::2]))):
        n = ok.sum(axis=1).astype(F32)
        total = np.where(ok, part, F32(0)).sum(axis=1, dtype=F32)
        mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
        out[:, 3 * k] = n
        out[:, 3 * k + 1] = mean
        out[:, 3 * k + 2] = np.where(ok, np.square(part - mean[:, None]), F32(0)).sum(axis=1, dtype=F32)
    return out


def _bn_stats_placed(data, valid, starts, shape) -> np.ndarray:
    """A masked ``bn_stats`` of ``data``, the box of the access ``shape`` at ``starts`` that the mask keeps
    (``valid``: which of its elements, None for all of them). A box of a 2-D access starting at an even column is
    ``_bn_stats`` of the box itself, as an unmasked instruction over those elements computes it (the same parity
    groups, summed the same way); anything else counts the kept elements at their positions in the access."""
    if valid is None and len(shape) == 2 and int(starts[1]) % 2 == 0:
        return _bn_stats(data)
    return _bn_stats_masked(*embed(data, valid, starts, shape))


def _bn_aggr(data) -> np.ndarray:
    """``[P, 2]`` mean and population variance from (count, mean, M2) triples, combined in fp32 (Chan et al.).
    A triple of no elements on every partition (a parity group no element reached, or the slot of a chunk past a
    shape family's last) takes no part: the others combine as they would without it."""
    g = np.asarray(data, dtype=F32).reshape(np.shape(data)[0], -1, 3)
    g = g[:, (g[..., 0] != 0).any(axis=0)]
    count, mean, m2 = g[..., 0], g[..., 1], g[..., 2]
    total = count.sum(axis=1, dtype=F32)
    mu = (count * mean).sum(axis=1, dtype=F32) / total
    var = (m2 + count * np.square(mean - mu[:, None])).sum(axis=1, dtype=F32) / total
    return np.stack([mu, var], axis=1)


def bn_stats(ctx: OpContext) -> Lowered:
    if "reduce_mask" not in ctx.op.attrs:
        return Lowered(_cut(ctx, f"{ctx.e.const(_bn_stats)}({ctx.read('data', axes=PARTITION)})", done=PARTITION))
    # Under a mask over the free axes: the elements it keeps, each at its position in the access (even / odd).
    data, valid, starts = ctx.reduced_read("data", axes=PARTITION)
    access: Access = ctx.op.operands["data"]
    shape = ", ".join([ctx.box[0][2] if 0 in ctx.box else py_int(access.shape[0])]
                      + [py_int(s) for s in access.shape[1:]]) + ","  # fmt: skip
    starts[0] = "0"  # the partition box is the op mask's: data is already cut to it
    placed = f"{data}, {valid or 'None'}, ({', '.join(starts)},), ({shape})"
    return Lowered(_cut(ctx, f"{ctx.e.const(_bn_stats_placed)}({placed})", done=PARTITION))


def bn_aggr(ctx: OpContext) -> Lowered:
    return Lowered(_cut(ctx, f"{ctx.e.const(_bn_aggr)}({ctx.read('data', axes=PARTITION)})", done=PARTITION))


# -- GpSimd engine -----------------------------------------------------------------------------------------------


def tensor_partition_reduce(ctx: OpContext) -> Lowered:
    fn = REDUCTIONS[ctx.op.attrs["op"]]
    free = {k: k for k in range(1, len(ctx.shape))}  # the result [1, F...] keeps data's free axes
    return Lowered(f"{fn}({ctx.read('data', axes=free)}, axis=0, keepdims=True)")


def _index_values(ctx: OpContext, expr: Affine) -> str:
    """``expr`` evaluated at every position of the result (axes ``d<k>``), as an int64 array over the box."""
    shape = ctx.shape
    grid = np.full(shape, expr.const, dtype=np.int64)
    dynamic = Affine()  # loop indices and program ids: known when the instruction runs
    for v, c in expr.terms:
        if var_kind(v) == "axis":
            k = var_number(v)
            grid += c * np.arange(shape[k], dtype=np.int64).reshape([-1 if j == k else 1 for j in range(len(shape))])
        else:
            dynamic = dynamic + Affine.var(v, c)
    value = ctx.e.const(grid)
    if dynamic.terms:
        value = f"({value} + ({affine_code(dynamic)}))"
    return _cut(ctx, value)


def iota(ctx: OpContext) -> Lowered:
    # int32 arithmetic on the GpSimd engine; the framework converts to the result dtype.
    return Lowered(f"np.asarray({_index_values(ctx, ctx.op.attrs['expr'])}, dtype=np.int32)")


def affine_select(ctx: OpContext) -> Lowered:
    conditions = [f"({_index_values(ctx, c)} >= 0)" for c in ctx.op.attrs["pred"].constraints]
    pred = " & ".join(conditions) if conditions else "True"
    return Lowered(f"np.where({pred}, {ctx.read('on_true_tile')}, {ctx.read('on_false_value')})")


# -- DMA ---------------------------------------------------------------------------------------------------------


def dma_copy(ctx: OpContext) -> Lowered:
    side = hbm_operand(ctx.op)
    if side is not None:  # an indirect DMA: a gather (src in HBM) or a scatter (dst)
        return indirect.lower(ctx, side)
    return Lowered(writes=[("dst", ctx.read("src"), ctx.op.attrs["dst_rmw_op"])])


def dma_transpose(ctx: OpContext) -> Lowered:
    perm = tuple(ctx.op.attrs["axes"])
    return Lowered(f"np.transpose({ctx.read('src', axes=dict(enumerate(perm)))}, {perm})", fresh=False)


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
