"""Free-axis reductions (sum, max, min, mean, prod, var, all) with ``axis`` and ``keepdims``, against float64
formulas. Sums are compared with a bound for fp32 accumulation, not ulps: the order of additions differs."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand

# op -> (float64 formula with (axis, keepdims), input domain (lo, hi)). prod's inputs stay near 1 so the
# product of 64 of them neither overflows nor underflows.
REDUCTIONS = {
    "sum": (np.sum, (-2, 2)), "max": (np.max, (-4, 4)), "min": (np.min, (-4, 4)), "mean": (np.mean, (-2, 2)),
    "prod": (np.prod, (0.9, 1.1)), "var": (np.var, (-2, 2)), "all": (None, (0, 1)),
}  # fmt: skip

# (tile shape, axis, keepdims): one and two free axes, negative axis numbers.
LAYOUTS = [((128, 64), 1, False), ((128, 64), 1, True), ((128, 64), -1, True), ((128, 8, 16), (1, 2), False),
           ((128, 8, 16), 2, True), ((128, 8, 16), (-2, -1), True)]  # fmt: skip
LAYOUT_IDS = ["2d", "2d-keep", "2d-neg", "3d-both", "3d-last-keep", "3d-neg-keep"]


@nki.jit
def reduce_kernel(x, op, axis, keepdims):
    result = getattr(nl, op)(nl.load(x), axis=axis, keepdims=keepdims)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


def _bound(op, x, axis, dtype):
    """Absolute error an fp32 accumulation may add (n * eps * sum|x| for sums), plus one ulp of the output."""
    if op not in ("sum", "mean", "var"):
        return 0.0
    n = np.prod([x.shape[a] for a in np.atleast_1d(axis)])
    scale = np.sum(np.abs(x), axis=axis, keepdims=True).max() / (n if op != "sum" else 1)
    return float(n * 2.0**-23 * scale * (4 if op == "var" else 1))


def _tile_shaped(a):
    """A reduction of every free axis still leaves a tile with a free axis: [P, F] -> [P, 1]."""
    return a.reshape(-1, 1) if a.ndim == 1 else a


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("op", sorted(set(REDUCTIONS) - {"all"}))
def test_reduction(op, layout, dtype):
    shape, axis, keepdims = layout
    formula, (lo, hi) = REDUCTIONS[op]
    x = rand(shape, dtype, lo, hi, seed=len(op))
    got = reduce_kernel(x, op, axis, keepdims)
    want = _tile_shaped(formula(exact(x), axis=axis, keepdims=keepdims))
    assert got.shape == want.shape
    # prod of n values rounds n times in fp32: n/2 ulps of relative error at worst (about sqrt(n) typically).
    ulps = 32 if op == "prod" and dtype == F32 else 1
    assert_ulps(got, want, dtype, ulps=ulps, atol=_bound(op, exact(x), axis, dtype), what=f"nl.{op}")


@pytest.mark.parametrize("dtype", [np.dtype(np.bool_), F32], ids=["bool", "f32"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
def test_all(layout, dtype):
    shape, axis, keepdims = layout
    # Mostly-true inputs, so some rows are all true and some are not.
    x = (np.random.default_rng(1).random(shape) < 0.995).astype(dtype)
    got = reduce_kernel(x, "all", axis, keepdims)
    want = _tile_shaped(np.all(exact(x) != 0, axis=axis, keepdims=keepdims))
    assert want.any() and not want.all()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got != 0, want)


@nki.jit
def reduce_dtype_kernel(x):
    # Summing bf16 values into an fp32 result: no bf16 rounding of the sum.
    result = nl.sum(nl.load(x), axis=1, dtype=nl.float32)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


def test_reduction_dtype_argument():
    x = rand((128, 64), BF16, -2, 2, seed=3)
    got = reduce_dtype_kernel(x)
    want = exact(x).sum(axis=1, keepdims=True)
    assert_ulps(got, want, F32, atol=_bound("sum", exact(x), 1, F32), what="nl.sum(dtype=fp32)")
