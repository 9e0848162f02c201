"""NumPy source templates for every function name in ``nki_dsl.ir.functions``, computed in fp32.

Templates take their operands as ``{0}``, ``{1}``; the few functions NumPy lacks (``erf`` and what is built on
it) are defined here and reached through the generated module's namespace as ``fn.<name>``.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
_SQRT_HALF = np.float32(np.sqrt(0.5))
_SQRT_2_OVER_PI = np.float32(np.sqrt(2.0 / np.pi))
_TWO_OVER_SQRT_PI = np.float32(2.0 / np.sqrt(np.pi))


# erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)): 22 terms reach |error| < 1e-9 for |x| < 2.
_ERF_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) * 2 / math.sqrt(math.pi) for n in range(22))
_ERF_SPLIT = 2.0
_ERFC_CF_TERMS = 16  # Laplace's continued fraction for erfc: |error| < 1e-9 for |x| >= 2


def erf(x):
    """Error function in float64, |error| < 1e-9 (a few hundredths of an fp32 ulp): a Maclaurin series for
    |x| < 2, Laplace's continued fraction for erfc beyond. A cheaper 1.5e-7 approximation was off by several fp32
    ulps for small |x|, where erf(x) is small but its error was not."""
    x64 = np.asarray(x, dtype=np.float64)
    small = np.abs(x64) < _ERF_SPLIT
    if small.all():
        return _erf_series(x64).astype(F32)
    out = np.empty_like(x64)
    out[small] = _erf_series(x64[small])
    big = x64[~small]
    out[~small] = np.copysign(1.0 - _erfc_cf(np.abs(big)), big)
    return out.astype(F32)


def _erf_series(x):
    x2 = x * x
    acc = np.full_like(x, _ERF_SERIES[-1])
    for c in _ERF_SERIES[-2::-1]:  # Horner in x^2
        acc *= x2
        acc += c
    return acc * x


def _erfc_cf(a):
    """erfc(a) for a >= 2: exp(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))), from the tail."""
    f = np.zeros_like(a)
    for k in range(_ERFC_CF_TERMS, 0, -1):
        f += a
        np.divide(0.5 * k, f, out=f)
    f += a
    return np.exp(-a * a) / (math.sqrt(math.pi) * f)


def f32(x):
    """An operand of a float function as fp32. Float tiles already hold fp32 values (returned as they are); an
    integer tile is converted, as the JAX backend's functions do: NumPy's own promotion would compute an 8-bit
    tile in float16 (exp of a uint8 tile to 3 digits, the square in erf_dx wrapping at 256) and an int32 one in
    float64. The integer-closed functions (abs, negative, square, sign, relu) keep the tile's integers."""
    return np.asarray(x, dtype=F32)


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-f32(x)))).astype(F32)


def gelu(x):
    x = f32(x)
    return (0.5 * x * (1.0 + erf(x * _SQRT_HALF))).astype(F32)


def gelu_dx(x):
    x = f32(x)
    cdf = 0.5 * (1.0 + erf(x * _SQRT_HALF))
    pdf = np.exp(-0.5 * x * x) * np.float32(1.0 / np.sqrt(2.0 * np.pi))
    return (cdf + x * pdf).astype(F32)


def gelu_apprx_tanh(x):
    x = f32(x)
    return (0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))).astype(F32)


def silu_dx(x):
    x = f32(x)
    s = sigmoid(x)
    return (s * (1.0 + x * (1.0 - s))).astype(F32)


def softplus(x):
    return np.logaddexp(np.float32(0.0), f32(x)).astype(F32)


UNARY_TEMPLATES = {
    "copy": "{0}",
    "exp": "np.exp(fn.f32({0}))",
    "log": "np.log(fn.f32({0}))",
    "sqrt": "np.sqrt(fn.f32({0}))",
    "rsqrt": "(1.0 / np.sqrt(fn.f32({0})))",
    "reciprocal": "(1.0 / fn.f32({0}))",
    "tanh": "np.tanh(fn.f32({0}))",
    "sigmoid": "fn.sigmoid({0})",
    "relu": "np.maximum({0}, 0.0)",
    "gelu": "fn.gelu({0})",
    "gelu_apprx_tanh": "fn.gelu_apprx_tanh({0})",
    "gelu_apprx_sigmoid": "(fn.f32({0}) * fn.sigmoid(1.702 * fn.f32({0})))",
    "gelu_dx": "fn.gelu_dx({0})",
    "silu": "(fn.f32({0}) * fn.sigmoid({0}))",
    "silu_dx": "fn.silu_dx({0})",
    "erf": "fn.erf({0})",
    "erf_dx": "(fn.TWO_OVER_SQRT_PI * np.exp(-np.square(fn.f32({0}))))",
    "softplus": "fn.softplus({0})",
    "mish": "(fn.f32({0}) * np.tanh(fn.softplus({0})))",
    "abs": "np.abs({0})",
    "negative": "np.negative({0})",
    "square": "np.square({0})",
    "sin": "np.sin(fn.f32({0}))",
    "cos": "np.cos(fn.f32({0}))",
    "tan": "np.tan(fn.f32({0}))",
    "arctan": "np.arctan(fn.f32({0}))",
    "sign": "np.sign({0})",
    "floor": "np.floor(fn.f32({0}))",
    "ceil": "np.ceil(fn.f32({0}))",
    "trunc": "np.trunc(fn.f32({0}))",
    "logical_not": "np.logical_not({0})",
    "invert": "np.invert({0})",
}

BINARY_TEMPLATES = {
    "add": "np.add({0}, {1})",
    "subtract": "np.subtract({0}, {1})",
    "multiply": "np.multiply({0}, {1})",
    "divide": "np.divide({0}, {1})",
    "maximum": "np.maximum({0}, {1})",
    "minimum": "np.minimum({0}, {1})",
    "power": "np.power({0}, {1})",
    "mod": "np.mod({0}, {1})",
    "fmod": "np.fmod({0}, {1})",
    "equal": "np.equal({0}, {1})",
    "not_equal": "np.not_equal({0}, {1})",
    "greater": "np.greater({0}, {1})",
    "greater_equal": "np.greater_equal({0}, {1})",
    "less": "np.less({0}, {1})",
    "less_equal": "np.less_equal({0}, {1})",
    "logical_and": "np.logical_and({0}, {1})",
    "logical_or": "np.logical_or({0}, {1})",
    "logical_xor": "np.logical_xor({0}, {1})",
    "bitwise_and": "np.bitwise_and({0}, {1})",
    "bitwise_or": "np.bitwise_or({0}, {1})",
    "bitwise_xor": "np.bitwise_xor({0}, {1})",
    "left_shift": "np.left_shift({0}, {1})",
    "right_shift": "np.right_shift({0}, {1})",
}

# The NumPy reduction each reducible operator defines.
REDUCTIONS = {
    "add": "np.sum", "multiply": "np.prod", "maximum": "np.max", "minimum": "np.min",
    "logical_and": "np.all", "logical_or": "np.any", "mean": "np.mean", "var": "np.var",
    "bitwise_and": "np.bitwise_and.reduce", "bitwise_or": "np.bitwise_or.reduce",
}  # fmt: skip

TWO_OVER_SQRT_PI = _TWO_OVER_SQRT_PI


MATMUL_EDGE = 16  # the result is computed on whole multiples of this many rows and columns (see matmul32)


def matmul32(a, b) -> np.ndarray:
    """``a @ b`` in fp32 (a [M, K], b [K, N]) with every result element rounded as in a matmul of any other width,
    as the PE array computes each element the same way whatever the tile's size. OpenBLAS's sgemm computes a
    ragged edge of the result in other code paths, which sum in another order (measured with this project's
    OpenBLAS 0.3.31, Haswell kernels: a column of a block N % 16 in 1..8 columns wide differs in the last bit from
    the same column of a 512-column block, and NumPy hands a one-column product to gemv), so a shape family's
    masked 512-column block would not compute its concrete trace's numbers. So M and N are padded with zeros to
    multiples of ``MATMUL_EDGE`` (the Haswell sgemm kernels' tile; measured: every width from 1 to 512 columns and
    1 to 128 rows then rounds as the full tile) and the result cut; zero rows of the contraction are exact. Both
    ``nisa.nc_matmul`` and ``nl.matmul`` compute through it, so lowering one to the other keeps the bits."""
    a, b = np.asarray(a), np.asarray(b)
    m, n = a.shape[0], b.shape[1]
    pm, pn = -m % MATMUL_EDGE, -n % MATMUL_EDGE
    if pm:
        a = np.concatenate([a, np.zeros((pm, a.shape[1]), a.dtype)])
    if pn:
        b = np.concatenate([b, np.zeros((b.shape[0], pn), b.dtype)], axis=1)
    out = np.matmul(a, b)
    return out[:m, :n] if pm or pn else out
