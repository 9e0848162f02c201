"""Comparisons, logical and bitwise nl ops (and their Python operators) on float, integer and bool tiles, and
integer arithmetic with NKI's integer promotion. Results are exact, so expected values must match exactly."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, exact

COMPARISONS = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "less": np.less, "less_equal": np.less_equal,
}  # fmt: skip
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
# Bitwise formulas on Python ints (exact, independent of NumPy's integer kernels), wrapped to the dtype.
BITWISE = {
    "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b, "bitwise_xor": lambda a, b: a ^ b,
    "left_shift": lambda a, b: a << b, "right_shift": lambda a, b: a >> b,
}  # fmt: skip
INT_DTYPES = [np.dtype(np.int32), np.dtype(np.int16), np.dtype(np.uint8), np.dtype(np.uint32)]


@nki.jit
def binary_kernel(x, y, op):
    result = getattr(nl, op)(nl.load(x), nl.load(y))
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@nki.jit
def unary_kernel(x, op):
    result = getattr(nl, op)(nl.load(x))
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


def small_ints(shape, dtype, seed, lo=0, hi=8):
    """Few distinct values, so comparisons see many ties."""
    return np.random.default_rng(seed).integers(lo, hi, size=shape).astype(dtype)


def _wrap(values, dtype):
    """Python ints reduced modulo 2**bits into ``dtype``, as fixed-width integer hardware does."""
    bits = 8 * dtype.itemsize
    v = np.asarray(values, dtype=object) % (1 << bits)
    if dtype.kind == "i":
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v.astype(np.int64).astype(dtype)


@pytest.mark.parametrize("dtype", [F32, BF16, F16, np.dtype(np.int32), np.dtype(np.uint8)],
                         ids=["f32", "bf16", "f16", "i32", "u8"])  # fmt: skip
@pytest.mark.parametrize("op", sorted(COMPARISONS))
def test_comparisons(op, dtype):
    x, y = small_ints((128, 32), dtype, 1), small_ints((128, 32), dtype, 2)
    got = binary_kernel(x, y, op)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, COMPARISONS[op](exact(x), exact(y)))


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), F32, np.dtype(np.int32)], ids=["bool", "f32", "i32"])
@pytest.mark.parametrize("op", sorted(LOGICAL))
def test_logical(op, dtype):
    # Non-bool inputs are true where nonzero.
    x, y = small_ints((128, 32), dtype, 3, 0, 2), small_ints((128, 32), dtype, 4, 0, 3)
    got = binary_kernel(x, y, op)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, LOGICAL[op](exact(x) != 0, exact(y) != 0))


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), F32], ids=["bool", "f32"])
def test_logical_not(dtype):
    x = small_ints((128, 32), dtype, 5, 0, 2)
    got = unary_kernel(x, "logical_not")
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, exact(x) == 0)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise(op, dtype):
    hi = min(int(np.iinfo(dtype).max), 1 << 12)
    x = small_ints((128, 32), dtype, 6, 0, hi)
    y = small_ints((128, 32), dtype, 7, 0, 8) if "shift" in op else small_ints((128, 32), dtype, 7, 0, hi)
    if dtype.kind == "i" and op == "right_shift":
        x = (x.astype(np.int64) - hi // 2).astype(dtype)  # negative values shift arithmetically
    got = binary_kernel(x, y, op)
    fn = BITWISE[op]
    want = _wrap([fn(int(a), int(b)) for a, b in zip(x.ravel(), y.ravel())], dtype).reshape(x.shape)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), *INT_DTYPES], ids=lambda d: d.name)
def test_invert(dtype):
    x = small_ints((128, 32), dtype, 8, 0, 2 if dtype == np.bool_ else 1000)
    got = unary_kernel(x, "invert")
    want = ~exact(x).astype(bool) if dtype == np.bool_ else _wrap([~int(a) for a in x.ravel()], dtype)
    np.testing.assert_array_equal(got, np.reshape(want, x.shape))


@nki.jit
def operator_kernel(x, y, expr):
    result = eval(expr, {}, {"t": nl.load(x), "u": nl.load(y)})
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


OPERATORS = ["t & u", "t | u", "t ^ u", "~t", "t << 2", "t >> 1", "6 & t", "6 | t", "6 ^ t", "1 << u", "64 >> u",
             "t < u", "t <= u", "t > u", "t >= u", "t == u", "t != u", "t < 3", "3 < t", "t == 3"]  # fmt: skip


@pytest.mark.parametrize("expr", OPERATORS)
def test_python_operators_on_int_tiles(expr):
    x, y = small_ints((128, 32), np.int32, 9), small_ints((128, 32), np.int32, 10, 0, 4)
    got = operator_kernel(x, y, expr)
    want = eval(expr, {}, {"t": x.astype(np.int64), "u": y.astype(np.int64)})
    np.testing.assert_array_equal(got, want.astype(got.dtype))
    assert got.dtype == (np.bool_ if want.dtype == np.bool_ else np.int32)


# Integer arithmetic is exact; mixed widths promote as NKI does: (int8, uint8) -> int16, (int32, uint32) -> fp32.
INT_PROMOTIONS = [(np.int32, np.int32, np.int32), (np.int8, np.uint8, np.int16), (np.int16, np.int32, np.int32),
                  (np.int32, np.uint32, np.float32)]  # fmt: skip


@pytest.mark.parametrize(("dx", "dy", "dout"), INT_PROMOTIONS)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_integer_arithmetic(op, dx, dy, dout):
    x, y = small_ints((128, 32), dx, 11, 0, 100), small_ints((128, 32), dy, 12, 0, 100)
    got = binary_kernel(x, y, op)
    assert got.dtype == np.dtype(dout)
    want = getattr(np, op)(x.astype(np.int64), y.astype(np.int64))
    np.testing.assert_array_equal(got.astype(np.int64), want)
