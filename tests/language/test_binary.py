"""Elementwise binary nl math and the Python operators on tiles (incl. reflected forms and scalars), against
float64 formulas, with NKI's dtype promotion (reference/nki.md §2.2)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand

# op -> (float64 formula, x domain, y domain); a domain is (lo, hi, signed). Divisors stay away from zero,
# power bases positive. mod follows the divisor's sign (NumPy), fmod the dividend's.
BINARY = {
    "add": (np.add, (-4, 4, False), (-4, 4, False)),
    "subtract": (np.subtract, (-4, 4, False), (-4, 4, False)),
    "multiply": (np.multiply, (-4, 4, False), (-4, 4, False)),
    "divide": (np.divide, (-4, 4, False), (0.25, 4, True)),
    "maximum": (np.maximum, (-4, 4, False), (-4, 4, False)),
    "minimum": (np.minimum, (-4, 4, False), (-4, 4, False)),
    "power": (np.power, (0.25, 4, False), (-2, 2, False)),
    "mod": (np.mod, (-8, 8, False), (0.5, 3, True)),
    "fmod": (np.fmod, (-8, 8, False), (0.5, 3, True)),
}

# (x dtype, y dtype, result dtype): fp16 with bf16 promotes to fp32 (nki.md §2.2).
PAIRS = [(F32, F32, F32), (BF16, BF16, BF16), (F16, F16, F16), (BF16, F16, F32), (BF16, F32, F32)]
PAIR_IDS = ["f32", "bf16", "f16", "bf16*f16", "bf16*f32"]


def _ulps(op, dtype):
    # power is exp(y log x) in fp32: a few ulps; the rest are correctly rounded in fp32 (one rounding).
    return 4 if op == "power" and dtype == F32 else 1


@nki.jit
def binary_kernel(x, y, op):
    tx, ty = nl.load(x), nl.load(y)
    result = getattr(nl, op)(tx, ty)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


def sample(domain, shape, dtype, seed):
    lo, hi, signed = domain
    return rand(shape, dtype, lo, hi, seed=seed, signed=signed)


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_matches_formula(op, pair):
    dx, dy, dout = pair
    formula, x_dom, y_dom = BINARY[op]
    x, y = sample(x_dom, (128, 40), dx, 1), sample(y_dom, (128, 40), dy, 2)
    got = binary_kernel(x, y, op)
    assert_ulps(got, formula(exact(x), exact(y)), dout, ulps=_ulps(op, dout), what=f"nl.{op}")


@pytest.mark.parametrize(("y_shape", "name"), [((128, 1), "free"), ((1, 40), "partition")])
def test_binary_broadcasts_size_one_axes(y_shape, name):
    x, y = rand((128, 40), BF16, seed=3), rand(y_shape, BF16, seed=4)
    got = binary_kernel(x, y, "subtract")
    assert_ulps(got, exact(x) - exact(y), BF16, what=f"broadcast along the {name} axis")


# Python operators on tiles: expression -> result dtype for bf16 tiles t, u. Scalars are weak (nki.md §2.2): an
# int keeps the tile's dtype, a float (Python or NumPy) makes the result fp32.
OPERATORS = {
    "t+u": BF16, "t-u": BF16, "t*u": BF16, "t/u": BF16, "t%u": BF16, "t**2": BF16, "-t": BF16, "abs(t)": BF16,
    "3*t": BF16, "t-1": BF16, "1-t": BF16, "t+1.5": F32, "1.5+t": F32, "t-0.5": F32, "0.5-t": F32, "t*3.0": F32,
    "t/4.0": F32, "2.0/u": F32, "2.0**t": F32, "t**0.5": F32, "t%1.0": F32, "7.0%u": F32, "np.float32(2)*t": F32,
}  # fmt: skip


@nki.jit
def operator_kernel(x, y, expr):
    t, u = nl.load(x), nl.load(y)
    result = eval(expr, {"np": np}, {"t": t, "u": u})
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@pytest.mark.parametrize("expr", sorted(OPERATORS))
def test_python_operators(expr):
    x = rand((128, 32), BF16, 0.25, 4, seed=5)
    y = rand((128, 32), BF16, 0.5, 3, seed=6, signed=True)
    got = operator_kernel(x, y, expr)
    # The same expression on float64 arrays of the exact inputs is the formula.
    want = eval(expr, {"np": np}, {"t": exact(x), "u": exact(y)})
    dtype = OPERATORS[expr]
    ulps = 4 if "**" in expr and dtype == F32 else 1
    assert_ulps(got, want, dtype, ulps=ulps, what=expr)
