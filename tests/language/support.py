"""Inputs and ulp-based comparisons for the nl op tests.

Expected values come from each test's own formula, evaluated in float64 on the exact input values (the inputs
are drawn representable in their dtype), then rounded once to the output dtype, as an engine computing in fp32
and rounding on write does. The kernel's fp32 intermediate may land on the other side of a rounding boundary,
so comparisons allow a stated number of ulps of the output dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
FLOATS = [F32, BF16, F16]
FLOAT_IDS = ["f32", "bf16", "f16"]
_MANTISSA = {F32: 23, BF16: 7, F16: 10}


def rand(shape, dtype=F32, lo=-1.0, hi=1.0, seed=0, signed=False) -> np.ndarray:
    """Uniform values in [lo, hi) (with a random sign when ``signed``), representable in ``dtype``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, size=shape)
    if signed:
        x = x * rng.choice([-1.0, 1.0], size=shape)
    return x.astype(F32).astype(dtype)


def exact(a) -> np.ndarray:
    """The values of ``a`` (any dtype) as float64, exactly."""
    return np.asarray(a).astype(np.float64)


def rounded(value, dtype) -> np.ndarray:
    """``value`` (float64) rounded once, to nearest even, to ``dtype``.

    A float64 -> bf16 cast goes through fp32 (rounding twice); rounding to odd in the fp32 step makes the second
    rounding exact, since fp32 keeps more than two extra bits over bf16/fp16."""
    x = np.asarray(value, dtype=np.float64)
    dtype = np.dtype(dtype)
    if dtype.itemsize >= 4:
        return x.astype(dtype)
    t = x.astype(F32)
    inexact = np.isfinite(t) & (t.astype(np.float64) != x)
    t = np.where(inexact & (np.abs(t.astype(np.float64)) > np.abs(x)), np.nextafter(t, F32.type(0)), t)
    bits = t.view(np.uint32) | inexact.astype(np.uint32)
    with np.errstate(over="ignore"):  # beyond the type's range is inf, as intended
        return bits.view(F32).astype(dtype)


def ulp(x, dtype) -> np.ndarray:
    """Spacing of ``dtype`` at the magnitude of ``x`` (subnormal spacing near zero)."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.finfo(dtype)
    mag = np.maximum(np.abs(np.asarray(x, dtype=np.float64)), float(info.smallest_normal))
    return np.exp2(np.floor(np.log2(mag)) - _MANTISSA[dtype])


def assert_ulps(got, expected, dtype, ulps=1.0, atol=0.0, what=""):
    """``got`` has ``dtype`` and is within ``ulps`` ulps (of ``dtype``) plus ``atol`` of ``expected`` (float64)
    rounded once to ``dtype``. NaNs must match NaNs."""
    dtype = np.dtype(dtype)
    got = np.asarray(got)
    assert got.dtype == dtype, f"{what}: output dtype {got.dtype}, expected {dtype}"
    want = exact(rounded(expected, dtype))
    have = exact(got)
    assert np.array_equal(np.isnan(have), np.isnan(want)), f"{what}: NaN positions differ"
    ok = ~np.isnan(want)
    err = np.abs(have[ok] - want[ok])
    tol = ulps * np.maximum(ulp(want[ok], dtype), ulp(have[ok], dtype)) + atol
    bad = err > tol
    if bad.any():
        k = int(np.argmax(err - tol))
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {err.size} elements off by more than {ulps} ulp(s) + {atol:g}; worst: "
            f"got {have[ok][k]!r}, expected {want[ok][k]!r} (error {err[k]:.3g}, tolerance {tol[k]:.3g})"
        )
