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
