"""Names of the scalar functions ops apply elementwise: activation functions and ALU operators.

Kernels pass functions many ways (``np.exp``, ``nl.exp``, ``"exp"``, ``np.add``, ``nl.maximum``); the IR stores only
the canonical name. Backends hold their own implementation table keyed by these names.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.errors import NkiApiError

# Unary functions: activation functions of the Scalar engine and unary nl math.
UNARY = (
    "copy", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh",
    "gelu_apprx_sigmoid", "gelu_dx", "silu", "silu_dx", "erf", "erf_dx", "softplus", "mish", "abs", "negative",
    "square", "sin", "cos", "tan", "arctan", "sign", "floor", "ceil", "trunc", "logical_not", "invert",
)  # fmt: skip

# Binary ALU operators (tensor_tensor, tensor_scalar, nl binary math, reductions use a subset).
BINARY = (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "mod", "fmod",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
)  # fmt: skip

COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
LOGICAL = ("logical_and", "logical_or", "logical_xor", "logical_not")
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert")

# Reductions map a binary operator to the reduction it defines.
REDUCIBLE = ("add", "multiply", "maximum", "minimum", "logical_and", "logical_or", "bitwise_and", "bitwise_or")


def reduction_identity(fn: str, dtype):
    """The value of NumPy ``dtype`` that leaves an ``fn``-reduction unchanged: what a masked-off element counts
    as, and what an empty reduction gives."""
    dtype = np.dtype(dtype)
    if fn == "logical_and" or (fn == "bitwise_and" and dtype == np.bool_):
        return True
    if fn == "logical_or":
        return False
    if fn in ("add", "bitwise_or"):
        return dtype.type(0)
    if fn == "multiply":
        return dtype.type(1)
    if fn == "bitwise_and":
        return dtype.type(-1)  # all bits set
    if dtype == np.bool_:
        return fn == "minimum"
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return dtype.type(info.min if fn == "maximum" else info.max)
    return dtype.type(-np.inf if fn == "maximum" else np.inf)

_ALIASES = {
    "amax": "maximum", "max": "maximum", "amin": "minimum", "min": "minimum", "sum": "add", "prod": "multiply",
    "true_divide": "divide", "absolute": "abs", "identity": "copy", "bypass": "copy", "exponential": "exp",
    "neg": "negative", "sub": "subtract", "mul": "multiply", "pow": "power", "all": "logical_and",
}  # fmt: skip

_NUMPY_OBJECTS = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide", np.maximum: "maximum",
    np.minimum: "minimum", np.power: "power", np.mod: "mod", np.fmod: "fmod", np.equal: "equal",
    np.not_equal: "not_equal", np.greater: "greater", np.greater_equal: "greater_equal", np.less: "less",
    np.less_equal: "less_equal", np.logical_and: "logical_and", np.logical_or: "logical_or",
    np.logical_xor: "logical_xor", np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or",
    np.bitwise_xor: "bitwise_xor", np.left_shift: "left_shift", np.right_shift: "right_shift",
    np.exp: "exp", np.log: "log", np.sqrt: "sqrt", np.reciprocal: "reciprocal", np.tanh: "tanh", np.abs: "abs",
    np.negative: "negative", np.square: "square", np.sin: "sin", np.cos: "cos", np.tan: "tan",
    np.arctan: "arctan", np.sign: "sign", np.floor: "floor", np.ceil: "ceil", np.trunc: "trunc",
    np.logical_not: "logical_not", np.invert: "invert", np.max: "maximum", np.amax: "maximum",
    np.min: "minimum", np.amin: "minimum", np.sum: "add", np.prod: "multiply", np.all: "logical_and",
}  # fmt: skip


def function_name(fn, allowed: tuple[str, ...], what: str) -> str:
    """Canonical name of a function given as a NumPy ufunc, an ``nl`` function or a string."""
    name = None
    if isinstance(fn, str):
        name = _ALIASES.get(fn, fn)
    else:
        try:
            name = _NUMPY_OBJECTS.get(fn)
        except TypeError:  # unhashable
            name = None
        if name is None:
            name = getattr(fn, "__nki_function__", None)
    if name not in allowed:
        shown = getattr(fn, "__name__", repr(fn))
        raise NkiApiError(f"{what} {shown} is not supported; expected one of: {', '.join(allowed)}")
    return name
