"""``jax.numpy`` implementations of every function name in ``nki_dsl.ir.functions``, computed in fp32.

XLA's transcendental functions (exp, log, tanh, erf, ...) are not NumPy's: results may differ from the reference
by about one fp32 ulp, which every test tolerance comparing float outputs already allows.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import erf as _erf

F32 = jnp.float32
_SQRT_HALF = np.float32(np.sqrt(0.5))
_SQRT_2_OVER_PI = np.float32(np.sqrt(2.0 / np.pi))
_TWO_OVER_SQRT_PI = np.float32(2.0 / np.sqrt(np.pi))
_INV_SQRT_2PI = np.float32(1.0 / np.sqrt(2.0 * np.pi))


def _f32(x):
    x = jnp.asarray(x)
    return x if x.dtype == F32 else x.astype(F32)


def erf(x):
    return _erf(_f32(x))


def sigmoid(x):
    x = _f32(x)
    return 1.0 / (1.0 + jnp.exp(-x))


def gelu(x):
    x = _f32(x)
    return 0.5 * x * (1.0 + erf(x * _SQRT_HALF))


def gelu_dx(x):
    x = _f32(x)
    cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
    return cdf + x * (jnp.exp(-0.5 * x * x) * _INV_SQRT_2PI)


def gelu_apprx_tanh(x):
    x = _f32(x)
    return 0.5 * x * (1.0 + jnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


def silu_dx(x):
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def softplus(x):
    return jnp.logaddexp(np.float32(0.0), _f32(x))


def _float(fn):
    """An elementwise float function: integer tiles are computed as fp32, as NumPy's ufuncs promote them."""
    return lambda x: fn(_f32(x) if not jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x)


UNARY = {
    "copy": lambda x: x,
    "exp": _float(jnp.exp),
    "log": _float(jnp.log),
    "sqrt": _float(jnp.sqrt),
    "rsqrt": _float(lambda x: 1.0 / jnp.sqrt(x)),
    "reciprocal": _float(lambda x: 1.0 / x),
    "tanh": _float(jnp.tanh),
    "sigmoid": sigmoid,
    "relu": lambda x: jnp.maximum(x, 0.0),
    "gelu": gelu,
    "gelu_apprx_tanh": gelu_apprx_tanh,
    "gelu_apprx_sigmoid": lambda x: _f32(x) * sigmoid(1.702 * _f32(x)),
    "gelu_dx": gelu_dx,
    "silu": lambda x: _f32(x) * sigmoid(x),
    "silu_dx": silu_dx,
    "erf": erf,
    "erf_dx": lambda x: _TWO_OVER_SQRT_PI * jnp.exp(-jnp.square(_f32(x))),
    "softplus": softplus,
    "mish": lambda x: _f32(x) * jnp.tanh(softplus(x)),
    "abs": jnp.abs,
    "negative": jnp.negative,
    "square": jnp.square,
    "sin": _float(jnp.sin),
    "cos": _float(jnp.cos),
    "tan": _float(jnp.tan),
    "arctan": _float(jnp.arctan),
    "sign": jnp.sign,
    "floor": _float(jnp.floor),
    "ceil": _float(jnp.ceil),
    "trunc": _float(jnp.trunc),
    "logical_not": jnp.logical_not,
    "invert": jnp.invert,
}


def _divide(a, b):
    # XLA rewrites a division by a broadcast value into a multiplication by its reciprocal: two roundings, so a
    # quotient may be 1 ulp off the NumPy reference's correctly rounded one (the tests' fp32 tolerances allow
    # that). Spreading the divisor by a gather of index 0 no longer hides the broadcast (jax 0.10.2 simplifies the
    # gather back into one: the quotients were bit-identical with and without it, for the [P, 1] and [1, F]
    # divisors kernels use), so it only cost an XLA kernel per division; an optimization_barrier would keep the
    # division, but XLA CPU miscompiles it once the kernel is fused into a user's jit-ed program ahead of a dot
    # (tests/backends/jax/test_interop.py).
    return jnp.true_divide(jnp.asarray(a), jnp.asarray(b))


BINARY = {
    "add": jnp.add,
    "subtract": jnp.subtract,
    "multiply": jnp.multiply,
    "divide": _divide,
    "maximum": jnp.maximum,
    "minimum": jnp.minimum,
    "power": jnp.power,
    "mod": jnp.mod,
    "fmod": jnp.fmod,
    "equal": jnp.equal,
    "not_equal": jnp.not_equal,
    "greater": jnp.greater,
    "greater_equal": jnp.greater_equal,
    "less": jnp.less,
    "less_equal": jnp.less_equal,
    "logical_and": jnp.logical_and,
    "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor,
    "bitwise_and": jnp.bitwise_and,
    "bitwise_or": jnp.bitwise_or,
    "bitwise_xor": jnp.bitwise_xor,
    "left_shift": jnp.left_shift,
    "right_shift": jnp.right_shift,
}


def _bitwise_reduce(op):
    def reduce(x, axis, keepdims):
        x = jnp.asarray(x)
        out = lax.reduce(x, np.array(-1 if op is lax.bitwise_and else 0, x.dtype), op, tuple(axis))
        if keepdims:
            for a in sorted(axis):
                out = jnp.expand_dims(out, a)
        return out

    return reduce


def _nan_propagating(reduce, combine):
    """``reduce`` (jnp.max / jnp.min) giving NaN wherever a reduced element is NaN, as NumPy does. XLA's CPU
    reductions drop NaN in some layouts (jax 0.10.2: the all-NaN rows of a [2, 128, 512] array max-reduce over the
    last axis to -inf), which would hide poisoned fresh memory that the NumPy reference shows.

    The extremum and "any element NaN" are one variadic reduction (``combine`` for the values, ``or`` for the
    flags): one pass over the data, as fast as the plain reduction. (Reducing ``isnan`` separately made XLA write a
    boolean array as large as the input and reduce it in two more kernels: softmax 4096x512 took 1.5x plain jax.)
    Its derivative is the plain reduction's (JAX differentiates no general ``reduce``); they agree wherever the
    value is not NaN."""

    def fn(x, axis, keepdims):
        x = jnp.asarray(x)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return reduce(x, axis=axis, keepdims=keepdims)
        return _flagged(x, tuple(sorted(a % x.ndim for a in axis)), bool(keepdims))

    def pair(a, b):  # one function for every call: lax caches the reduction's jaxpr by it
        return combine(a[0], b[0]), lax.bitwise_or(a[1], b[1])

    @functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
    def _flagged(x, axis, keepdims):
        if not axis:
            return x
        init = np.array(-np.inf if combine is lax.max else np.inf, x.dtype)
        value, nan = lax.reduce((x, jnp.isnan(x)), (init, np.bool_(False)), pair, axis)
        value = jnp.where(nan, jnp.asarray(jnp.nan, x.dtype), value)
        return jnp.expand_dims(value, axis) if keepdims else value

    @_flagged.defjvp
    def _flagged_jvp(axis, keepdims, primals, tangents):
        _, tangent = jax.jvp(lambda v: reduce(v, axis=axis, keepdims=keepdims), primals, tangents)
        return _flagged(primals[0], axis, keepdims), tangent

    return fn


# The reduction each reducible operator defines, as f(x, axis: tuple, keepdims: bool).
REDUCTIONS = {
    "add": lambda x, axis, keepdims: jnp.sum(x, axis=axis, keepdims=keepdims),
    "multiply": lambda x, axis, keepdims: jnp.prod(x, axis=axis, keepdims=keepdims),
    "maximum": _nan_propagating(jnp.max, lax.max),
    "minimum": _nan_propagating(jnp.min, lax.min),
    "logical_and": lambda x, axis, keepdims: jnp.all(x, axis=axis, keepdims=keepdims),
    "logical_or": lambda x, axis, keepdims: jnp.any(x, axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims: jnp.mean(x, axis=axis, keepdims=keepdims),
    "var": lambda x, axis, keepdims: jnp.var(x, axis=axis, keepdims=keepdims),
    "bitwise_and": _bitwise_reduce(lax.bitwise_and),
    "bitwise_or": _bitwise_reduce(lax.bitwise_or),
}

# The value an accumulator register resets to, per reduction (fused reductions of the Scalar/Vector engines).
IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
