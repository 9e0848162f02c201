"""NumPy lowering of the ``nl`` ops and structural ops, keyed by op name (ops of one family share a handler)."""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.backends.numpy_ref import indirect
from nki_dsl.backends.numpy_ref.emitter import Lowered, OpContext, number_literal, tensor_var
from nki_dsl.backends.numpy_ref.functions import BINARY_TEMPLATES, REDUCTIONS, UNARY_TEMPLATES, matmul32
from nki_dsl.backends.numpy_ref.masked import masked_reduce
from nki_dsl.errors import NkiError
from nki_dsl.ir.constant_data import decode_constant
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.ops.language import BINARY_NL, UNARY_NL
from nki_dsl.ir.ops.language import REDUCTIONS as NL_REDUCTIONS

TRANSPOSED = {0: 1, 1: 0}  # result axis -> operand axis of a 2-D transpose


def alloc(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    helper = "alloc_on_chip" if t.type.buffer.on_chip else "alloc_hbm"
    ctx.e.line(f"{tensor_var(t.name)} = {helper}({t.type.shape}, {t.type.dtype!r})")
    return Lowered()


def fill(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    value = dtypes.held_value(t.type.dtype, ctx.op.attrs["value"])
    ctx.e.line(f"{tensor_var(t.name)} = alloc_on_chip({t.type.shape}, {t.type.dtype!r}, fill={number_literal(value)})")
    return Lowered()


def load(ctx: OpContext) -> Lowered:
    if "indices" in ctx.op.operands:  # a gather DMA
        return indirect.lower(ctx, "src")
    return Lowered(ctx.read("src"), fresh=False)


def load_transpose2d(ctx: OpContext) -> Lowered:
    return Lowered(f"{ctx.read('src', axes=TRANSPOSED)}.T", fresh=False)


def store(ctx: OpContext) -> Lowered:
    if "indices" in ctx.op.operands:  # a scatter DMA
        return indirect.lower(ctx, "dst")
    return Lowered(writes=[("dst", ctx.read("value"), "none")])


def assign(ctx: OpContext) -> Lowered:
    first = ctx.op.attrs.get("zero_first", "")
    if first:
        # the accumulator's nl.zeros, folded into the first iteration of loop `first` (lower-language): zeroing the
        # region there and adding gives the very bits the traced zeros-then-accumulate gives
        loop = next(lp for _, loops in ctx.e.kernel.walk() for lp in loops if lp.var == first)
        dst = ctx.code(ctx.op.operands["dst"])
        dtype = ctx.op.operands["dst"].tensor.type.dtype
        zeros = f"np.zeros(({', '.join(dst.shape)},), {dtype!r})"
        ctx.e.line(f"if {loop.var} == {loop.start}:")
        ctx.e.line(f"    {dst.write(zeros)}")
    return Lowered(writes=[("dst", ctx.read("src"), ctx.op.attrs["accumulate"])])


def copy(ctx: OpContext) -> Lowered:
    return Lowered(ctx.read("x"), fresh=False)


def transpose(ctx: OpContext) -> Lowered:
    return Lowered(f"{ctx.read('x', axes=TRANSPOSED)}.T", fresh=False)


def broadcast_to(ctx: OpContext) -> Lowered:
    return Lowered(f"np.broadcast_to({ctx.read('x')}, {ctx.box_shape()})", fresh=False)


def expand_dims(ctx: OpContext) -> Lowered:
    return Lowered(f"np.expand_dims({ctx.read('x', axes=None)}, {ctx.op.attrs['axis']})", fresh=False)


def unary(ctx: OpContext) -> Lowered:
    fn = ctx.op.name.split(".", 1)[1]
    return Lowered(UNARY_TEMPLATES[fn].format(ctx.read("x")), fresh=fn != "copy")


def binary(ctx: OpContext) -> Lowered:
    fn = ctx.op.name.split(".", 1)[1]
    return Lowered(BINARY_TEMPLATES[fn].format(ctx.read("x"), ctx.read("y")))


def reduce(ctx: OpContext) -> Lowered:
    return Lowered(reduction(ctx, "x", OPS[ctx.op.name].fn))


def reduction(ctx: OpContext, operand: str, fn: str) -> str:
    """Source for the ``fn``-reduction of tile ``operand`` along the op's ``axis`` / ``keepdims`` attributes
    (``nl`` reductions and ``nisa.tensor_reduce``)."""
    axis, keepdims = tuple(ctx.op.attrs["axis"]), ctx.op.attrs["keepdims"]
    # Without keepdims, result axis j is the j-th kept input axis (a trailing size-1 free axis has none).
    kept = [k for k in range(len(ctx.op.operands[operand].shape)) if k not in axis]
    axes = "aligned" if keepdims else dict(enumerate(kept))
    if "reduce_mask" in ctx.op.attrs:  # masked-off elements of the reduced axes do not take part
        data, valid, _ = ctx.reduced_read(operand, axes)
        value = f"{ctx.e.const(masked_reduce)}({fn!r}, {data}, {valid or 'None'}, {axis}, {keepdims})"
    else:
        value = f"{REDUCTIONS[fn]}({ctx.read(operand, axes=axes)}, axis={axis}, keepdims={keepdims})"
    if not keepdims and len(kept) < len(ctx.shape):
        value = f"{value}.reshape({ctx.box_shape()})"
    return value


def matmul(ctx: OpContext) -> Lowered:
    # Result [M, N]: axis 0 (M) is x's axis 1 when x is given as [K, M] (transpose_x), else x's axis 0; axis 1 (N)
    # is y's axis 1. A mask's box over the result cuts x's M axis and y's N axis; K is never masked.
    x_m_axis = 1 if ctx.op.attrs["transpose_x"] else 0
    x, y = ctx.read("x", axes={0: x_m_axis}), ctx.read("y", axes={1: 1})
    # fp32 operands (already rounded to their tile dtype) and an fp32 product: PSUM accumulates in fp32.
    # The transposed operand is made contiguous first: OpenBLAS is pathologically slow on small transposed GEMMs.
    if ctx.op.attrs["transpose_x"]:
        return Lowered(f"{ctx.e.const(matmul32)}(np.ascontiguousarray({x}.T), {y})")
    return Lowered(f"{ctx.e.const(matmul32)}({x}, {y})")


def select(ctx: OpContext) -> Lowered:
    return Lowered(f"np.where({ctx.read('condition')}, {ctx.read('x')}, {ctx.read('y')})")


def dropout(ctx: OpContext) -> Lowered:
    keep = f"(rng.uniform({ctx.box_shape()}) >= {ctx.read('rate')})"
    return Lowered(f"np.where({keep}, {ctx.read('x')}, np.float32(0.0))")


def random_seed(ctx: OpContext) -> Lowered:
    ctx.e.line(f"rng.seed({ctx.read('seed', axes=None)})")
    return Lowered()


def show(prefix: str, values) -> None:
    """``nl.device_print``: the prefix, then the values (a copy: later writes do not change what was printed)."""
    print(prefix, np.array(values), flush=True)


def device_print(ctx: OpContext) -> Lowered:
    ctx.e.line(f"{ctx.e.const(show)}({ctx.op.attrs['prefix']!r}, {ctx.read('x', axes=None)})")
    return Lowered()


def constant(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    # Decoded once, at compile time: the generated code names a read-only array.
    array = decode_constant(ctx.op.attrs["data"], t.type.shape, t.type.dtype)
    ctx.e.line(f"{tensor_var(t.name)} = {ctx.e.const(array)}")
    return Lowered()


def reshape(ctx: OpContext) -> Lowered:
    src = ctx.op.operands["x"].tensor
    ctx.e.line(f"{tensor_var(ctx.op.result.name)} = {tensor_var(src.name)}.reshape({ctx.op.attrs['shape']})")
    return Lowered()


def hbm_view(array: np.ndarray, dtype_name: str, shape: tuple, name: str) -> np.ndarray:
    """``array``'s bytes as ``dtype_name`` (``hbm.view``, ir/hbm_views.py): a NumPy view, so writes through it land in
    ``array``; the last axis splits or merges by the element-size ratio, row-major as on the device."""
    try:
        out = array.view(dtypes.get(dtype_name).np_dtype)
    except ValueError:  # a caller's array whose last axis is strided: its bytes are not in the device's order
        raise NkiError(f"the NumPy backend cannot view %{name} as {dtype_name} in place: its array's last axis is "
                       f"not contiguous (pass a C-contiguous array)") from None  # fmt: skip
    return out.reshape(shape)


def view(ctx: OpContext) -> Lowered:
    src, t = ctx.op.operands["x"].tensor, ctx.op.result
    helper = ctx.e.const(hbm_view)
    ctx.e.line(f"{tensor_var(t.name)} = {helper}({tensor_var(src.name)}, {t.type.dtype!r}, {t.type.shape}, "
               f"{ctx.e.const(src.name)})")
    return Lowered()


LANGUAGE_HANDLERS = {
    "alloc": alloc, "nl.full": fill, "nl.load": load, "nl.load_transpose2d": load_transpose2d, "nl.store": store,
    "assign": assign, "nl.copy": copy, "nl.transpose": transpose, "nl.broadcast_to": broadcast_to,
    "nl.expand_dims": expand_dims, "nl.matmul": matmul, "nl.where": select, "nl.dropout": dropout,
    "nl.random_seed": random_seed, "nl.device_print": device_print, "hbm.reshape": reshape, "hbm.view": view,
    "nl.shared_constant": constant,
    **{f"nl.{fn}": unary for fn in UNARY_NL},
    **{f"nl.{fn}": binary for fn in BINARY_NL},
    **{f"nl.{name}": reduce for name in NL_REDUCTIONS},
}  # fmt: skip
