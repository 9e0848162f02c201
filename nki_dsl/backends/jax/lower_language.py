"""JAX lowering of the ``nl`` ops and structural ops, one handler per op family."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl import dtypes
from nki_dsl.backends.jax import indirect, runtime
from nki_dsl.backends.jax.analysis import RNG
from nki_dsl.backends.jax.context import Lowered, OpContext
from nki_dsl.backends.jax.functions import BINARY, REDUCTIONS, UNARY
from nki_dsl.ir.constant_data import decode_constant
from nki_dsl.ir.functions import reduction_identity
from nki_dsl.ir.ops import OPS

HIGHEST = lax.Precision.HIGHEST  # fp32 products on every device (GPUs and TPUs default to lower precision)


def fn_name(ctx: OpContext) -> str:
    """The function an nl unary/binary/reduce op applies (its op table entry names it)."""
    return OPS[ctx.op.name].fn


def alloc(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    ctx.state.set_array(t.name, ctx.state.fresh(t.name))
    return Lowered()


def fill(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    value = dtypes.held_value(t.type.dtype, ctx.op.attrs["value"])
    ctx.state.set_array(t.name, runtime.alloc_on_chip(t.type.shape, t.type.dtype, fill=value))
    return Lowered()


def load(ctx: OpContext) -> Lowered:
    if "indices" in ctx.op.operands:  # a gather DMA
        return indirect.lower(ctx, "src")
    return Lowered(ctx.read("src"))


def transposed(ctx: OpContext, name: str) -> Lowered:
    return Lowered(jnp.transpose(ctx.read(name)))


def store(ctx: OpContext) -> Lowered:
    if "indices" in ctx.op.operands:  # a scatter DMA
        return indirect.lower(ctx, "dst")
    return Lowered(writes=[("dst", ctx.read("value"), "none")])


def assign(ctx: OpContext) -> Lowered:
    accumulate = ctx.op.attrs["accumulate"]
    first = ctx.op.attrs.get("zero_first", "")
    src = ctx.read("src")
    if first and accumulate != "none":
        # the accumulator's nl.zeros, folded into the first iteration of loop `first` (lower-language): the region
        # counts as zero there, so the first accumulation overwrites, giving the bits zeros-then-accumulate gives
        loop = next(lp for _, loops in ctx.state.info.kernel.walk() for lp in loops if lp.var == first)
        dst = ctx.state.read(ctx.op.operands["dst"])
        dst = jnp.where(jnp.asarray(ctx.ivars[first]) == loop.start, jnp.zeros_like(dst), dst)
        return Lowered(writes=[("dst", BINARY[accumulate](dst, src), "none")])
    return Lowered(writes=[("dst", src, accumulate)])


def copy(ctx: OpContext) -> Lowered:
    return Lowered(ctx.read("x"))


def broadcast_to(ctx: OpContext) -> Lowered:
    return Lowered(jnp.broadcast_to(ctx.read("x"), ctx.shape))


def expand_dims(ctx: OpContext) -> Lowered:
    axis = ctx.op.attrs["axis"]
    return Lowered(jnp.expand_dims(ctx.read("x"), axis if isinstance(axis, int) else tuple(axis)))


def unary(ctx: OpContext) -> Lowered:
    return Lowered(UNARY[fn_name(ctx)](jnp.asarray(ctx.read("x"))))


def binary(ctx: OpContext) -> Lowered:
    x, y = ctx.read("x"), ctx.read("y")
    return Lowered(BINARY[fn_name(ctx)](x, y))


def reduce(ctx: OpContext) -> Lowered:
    return Lowered(reduction(ctx, "x", fn_name(ctx)))


def reduction(ctx: OpContext, operand: str, fn: str):
    """The ``fn``-reduction of tile ``operand`` along the op's ``axis`` / ``keepdims`` attributes."""
    axis, keepdims = tuple(ctx.op.attrs["axis"]), ctx.op.attrs["keepdims"]
    data = ctx.read(operand)
    valid = ctx.reduced_valid(operand)
    if valid is not None:  # masked-off elements of the reduced axes count as the reduction's identity
        data = jnp.asarray(data)
        data = jnp.where(valid, data, reduction_identity(fn, data.dtype))
    value = REDUCTIONS[fn](data, axis, keepdims)
    return value.reshape(ctx.shape)


def matmul(ctx: OpContext) -> Lowered:
    x, y = ctx.read("x"), ctx.read("y")
    if ctx.op.attrs["transpose_x"]:
        x = jnp.transpose(x)
    # fp32 operands (already rounded to their tile dtype) and an fp32 product: PSUM accumulates in fp32.
    return Lowered(jnp.matmul(x.astype(jnp.float32), y.astype(jnp.float32), precision=HIGHEST))


def select(ctx: OpContext) -> Lowered:
    return Lowered(jnp.where(ctx.read("condition"), ctx.read("x"), ctx.read("y")))


def uniform(ctx: OpContext, shape):
    """Uniform [0, 1) fp32 draws from the launch's generator (JAX's, not NumPy's: same distribution, other
    numbers), advancing it."""
    key, sub = jax.random.split(ctx.state.env[RNG])
    ctx.state.env[RNG] = key
    return jax.random.uniform(sub, tuple(shape), jnp.float32)


def dropout(ctx: OpContext) -> Lowered:
    keep = uniform(ctx, ctx.shape) >= ctx.read("rate")
    return Lowered(jnp.where(keep, ctx.read("x"), jnp.float32(0.0)))


def random_seed(ctx: OpContext) -> Lowered:
    seed = jnp.asarray(ctx.read("seed")).reshape(-1)[0]
    ctx.state.env[RNG] = jax.random.key(seed.astype(jnp.uint32))
    return Lowered()


def _show(prefix: str, values) -> None:
    print(prefix, np.asarray(values), flush=True)


def device_print(ctx: OpContext) -> Lowered:
    """``nl.device_print``: printed from the running program, in program order, by a host callback."""
    jax.debug.callback(functools.partial(_show, ctx.op.attrs["prefix"]), ctx.read("x"), ordered=True)
    return Lowered()


def constant(ctx: OpContext) -> Lowered:
    t = ctx.op.result
    array = decode_constant(ctx.op.attrs["data"], t.type.shape, t.type.dtype)
    ctx.state.set_array(t.name, jnp.asarray(array))
    return Lowered()


def reshape(ctx: OpContext) -> Lowered:
    return Lowered()  # a view: reads and writes of it go to its root's storage (KernelInfo.roots)


FAMILY_HANDLERS = {
    "alloc": alloc, "fill": fill, "load": load, "load_transpose2d": lambda c: transposed(c, "src"), "store": store,
    "assign": assign, "copy": copy, "transpose": lambda c: transposed(c, "x"), "broadcast_to": broadcast_to,
    "expand_dims": expand_dims, "unary": unary, "binary": binary, "reduce": reduce, "matmul": matmul,
    "select": select, "dropout": dropout, "random_seed": random_seed, "print": device_print, "reshape": reshape,
    "constant": constant,
}  # fmt: skip
