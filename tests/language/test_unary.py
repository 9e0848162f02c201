"""Elementwise unary nl math on the NumPy backend against float64 formulas, for fp32, bf16 and fp16 tiles."""

import math

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand

_erf = np.vectorize(math.erf)  # exact to double precision; the backend has its own approximation


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _phi(x):  # standard normal CDF
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


def _softplus(x):
    return np.log1p(np.exp(x))


# op -> (float64 formula, input domain (lo, hi, signed), fp32 tolerance in ulps, absolute tolerance in fp32 eps).
# Domains avoid poles and overflow. Composite activations evaluated in fp32 lose a few ulps; the absolute term
# covers cancellation where a result passes through zero (gelu of a negative input is a small difference).
UNARY = {
    "exp": (np.exp, (-4, 4, False), 2, 0),
    "log": (np.log, (0.05, 8, False), 2, 1),
    "sqrt": (np.sqrt, (0, 8, False), 1, 0),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.05, 8, False), 2, 0),
    "reciprocal": (lambda x: 1 / x, (0.1, 4, True), 1, 0),
    "tanh": (np.tanh, (-4, 4, False), 2, 1),
    "sigmoid": (_sigmoid, (-6, 6, False), 3, 1),
    "relu": (lambda x: np.maximum(x, 0), (-4, 4, False), 0, 0),
    "gelu": (lambda x: x * _phi(x), (-4, 4, False), 4, 4),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
                        (-4, 4, False), 4, 4),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), (-4, 4, False), 4, 4),
    "gelu_dx": (lambda x: _phi(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi), (-4, 4, False), 4, 4),
    "silu": (lambda x: x * _sigmoid(x), (-4, 4, False), 4, 4),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), (-4, 4, False), 4, 4),
    "erf": (_erf, (-3, 3, False), 2, 1),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), (-3, 3, False), 3, 1),
    "softplus": (_softplus, (-6, 6, False), 3, 1),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (-4, 4, False), 4, 4),
    "abs": (np.abs, (-4, 4, False), 0, 0),
    "negative": (np.negative, (-4, 4, False), 0, 0),
    "square": (np.square, (-4, 4, False), 1, 0),
    "sin": (np.sin, (-4, 4, False), 2, 1),
    "cos": (np.cos, (-4, 4, False), 2, 1),
    "tan": (np.tan, (-1.4, 1.4, False), 3, 1),
    "arctan": (np.arctan, (-4, 4, False), 2, 1),
    "sign": (np.sign, (-4, 4, False), 0, 0),
    "floor": (np.floor, (-4, 4, False), 0, 0),
    "ceil": (np.ceil, (-4, 4, False), 0, 0),
    "trunc": (np.trunc, (-4, 4, False), 0, 0),
}  # fmt: skip

# (input dtype, dtype= of the op or None): the result rounds once to the op's dtype, never to the input's first.
DTYPES = [(F32, None), (BF16, None), (F16, None), (BF16, F32), (F32, BF16)]
DTYPE_IDS = ["f32", "bf16", "f16", "bf16->f32", "f32->bf16"]


@nki.jit
def unary_kernel(x, op, out_dtype):
    out = nl.ndarray(x.shape, dtype=out_dtype or x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    result = getattr(nl, op)(tile) if out_dtype is None else getattr(nl, op)(tile, dtype=out_dtype)
    nl.store(out, value=result)
    return out


def sample(op, dtype, shape=(128, 48)):
    _, (lo, hi, signed), _, _ = UNARY[op]
    return rand(shape, dtype, lo, hi, seed=len(op), signed=signed)


@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_matches_formula(op, dtypes):
    in_dtype, op_dtype = dtypes
    formula, _, ulps, eps = UNARY[op]
    x = sample(op, in_dtype)
    out_dtype = op_dtype or in_dtype
    got = unary_kernel(x, op, None if op_dtype is None else op_dtype.name)
    # A narrow output rounds the fp32 result once: at most one ulp of it from the once-rounded exact value.
    ulps = ulps if out_dtype == F32 else 1
    assert_ulps(got, formula(exact(x)), out_dtype, ulps=ulps, atol=eps * 2.0**-23, what=f"nl.{op}")


# The functions that keep an integer tile's integers (and its wrap-around): the rest compute in fp32.
INTEGER_CLOSED = {"abs", "negative", "square", "sign", "relu"}


def _integers(op, dtype, shape=(128, 16)):
    """Integer inputs inside the op's domain (its poles and overflow avoided), every sign the dtype has."""
    _, (lo, hi, signed), _, _ = UNARY[op]
    lo = max(math.ceil(lo), 1) if lo > 0 or signed else math.ceil(lo)
    values = np.arange(lo, math.floor(hi) + 1)
    if signed:
        values = np.concatenate([values, -values])
    info = np.iinfo(dtype)
    values = values[(values >= info.min) & (values <= info.max)]
    return np.resize(values, shape).astype(dtype)


FLOAT_FUNCTIONS = tuple(sorted(set(UNARY) - INTEGER_CLOSED))


@nki.jit
def float_functions_kernel(x, ops):
    """Row block k of the fp32 result is ``ops[k]`` of row block k of x (one kernel for every function)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for k, op in enumerate(ops):
        nl.store(out[k], value=getattr(nl, op)(nl.load(x[k]), dtype=nl.float32))
    return out


# On JAX (slow: XLA takes seconds to compile this kernel of 25 functions) it checks the same numbers.
@pytest.mark.parametrize("kernel_backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)], indirect=True)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
def test_a_float_function_of_an_integer_tile_computes_in_fp32(dtype, kernel_backend):
    # An 8-bit integer tile is computed as fp32, as on the engines: not in float16 (NumPy's own promotion of
    # 8-bit integers, exp to 3 digits) and not on the negation's or the square's wrap-around (sigmoid of uint8 1
    # computed as 1 / (1 + exp(255)) is 0).
    x = np.stack([_integers(op, dtype) for op in FLOAT_FUNCTIONS])
    got = float_functions_kernel(x, FLOAT_FUNCTIONS)
    for k, op in enumerate(FLOAT_FUNCTIONS):
        formula, _, ulps, eps = UNARY[op]
        assert_ulps(got[k], formula(exact(x[k])), F32, ulps=ulps, atol=eps * 2.0**-23, what=f"nl.{op} of {dtype}")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.int8, np.int32])
@pytest.mark.parametrize("fn", ["negative", "abs", "ceil"])
def test_integer_negative_abs_and_ceil_wrap_around_as_numpy_on_every_backend(fn, dtype):
    # Integer tiles go to the Vector ALU's exact integer arithmetic (passes/lower_math.py), which wraps modulo
    # 2**bits as NumPy and JAX do: -x of an unsigned tile is 2**bits - x, and -(-128) of int8 is -128. (The
    # simulator computes from the lowered IR, whose -1 immediate did not fit an unsigned tile: an OverflowError.)
    info = np.iinfo(dtype)
    a = np.resize(np.array([0, 1, 5, info.max, info.min, info.max // 3], dtype), (128, 6))
    if fn == "ceil" and info.bits == 32:
        # Not yet agreed: the reference rounds a 32-bit integer's ceil through fp32 (715827882 -> 715827904), the
        # simulator's lowered IR keeps it exact. Values fp32 holds exactly, until that is decided.
        a = np.resize(np.array([0, 1, 5, 1 << 24, info.min, 12345], dtype), (128, 6))

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, fn)(nl.load(a)))
        return out

    expected = {"negative": np.negative, "abs": np.abs, "ceil": lambda v: v}[fn](a)  # ceil of an integer is itself
    for got in (kernel(a), kernel(a, backend="simulator")):
        assert np.asarray(got).dtype == dtype
        np.testing.assert_array_equal(np.asarray(got), expected)
