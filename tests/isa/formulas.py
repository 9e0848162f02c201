"""Independent float64 NumPy formulas for the Scalar-engine activation functions, written from their textbook
definitions (not from the backend's templates), with an input domain where each is defined."""

from __future__ import annotations

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _softplus(x):
    return np.log1p(np.exp(x))


# name -> (formula on float64, (lo, hi) of the activation's argument)
ACTIVATION_FORMULAS = {
    "copy": (lambda x: x, (-2, 2)),
    "square": (lambda x: x * x, (-2, 2)),
    "sigmoid": (_sigmoid, (-4, 4)),
    "relu": (lambda x: np.where(x > 0, x, 0.0), (-2, 2)),
    "gelu": (_gelu, (-3, 3)),
    "gelu_dx": (lambda x: 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
                (-3, 3)),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), (-3, 3)),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), (-3, 3)),
    "silu": (lambda x: x * _sigmoid(x), (-4, 4)),
    "silu_dx": (lambda x: _sigmoid(x) + x * _sigmoid(x) * (1 - _sigmoid(x)), (-4, 4)),
    "tanh": (np.tanh, (-3, 3)),
    "softplus": (_softplus, (-4, 4)),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (-3, 3)),
    "erf": (_erf, (-2, 2)),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), (-2, 2)),
    "exp": (np.exp, (-4, 4)),
    "log": (np.log, (0.1, 8)),
    "sin": (np.sin, (-math.pi, math.pi)),
    "arctan": (np.arctan, (-1.5, 1.5)),
    "sqrt": (np.sqrt, (0.1, 8)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 8)),
    "reciprocal": (lambda x: 1 / x, (0.25, 8)),
    "sign": (np.sign, (-2, 2)),
    "abs": (np.abs, (-2, 2)),
}  # fmt: skip


# Vector-engine ALU operators on float64 values (comparisons give 1.0 / 0.0), with a domain for the second
# operand that keeps each one defined and well conditioned.
ALU_FORMULAS = {
    "add": (lambda a, b: a + b, (-2, 2)),
    "subtract": (lambda a, b: a - b, (-2, 2)),
    "multiply": (lambda a, b: a * b, (-2, 2)),
    "divide": (lambda a, b: a / b, (0.5, 2)),
    "maximum": (lambda a, b: np.where(a > b, a, b), (-2, 2)),
    "minimum": (lambda a, b: np.where(a < b, a, b), (-2, 2)),
    "greater": (lambda a, b: (a > b) * 1.0, (-2, 2)),
    "less_equal": (lambda a, b: (a <= b) * 1.0, (-2, 2)),
    "equal": (lambda a, b: (a == b) * 1.0, (-2, 2)),
}


def alu(name, a, b, reverse=False):
    """``a op b``, or ``b op a`` when ``reverse`` (the operand order NKI's reverse flags select)."""
    fn = ALU_FORMULAS[name][0]
    return fn(b, a) if reverse else fn(a, b)
