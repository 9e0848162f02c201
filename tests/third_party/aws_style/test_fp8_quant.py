import ml_dtypes
import nki
import nki.language as nl
import numpy as np
import pytest
from conftest import DTYPES, as64
from fp8_quant import FP8_MAX, dequantize_rows, quantize_rows

E4M3 = ml_dtypes.float8_e4m3fn


def reference_scales(x):
    return np.maximum(np.abs(as64(x)).max(axis=1, keepdims=True), 1e-12) / FP8_MAX


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("N,D", [(128, 64), (200, 96), (37, 512)])
def test_quantize_rows(rng, dtype, N, D):
    x = (rng.standard_normal((N, D)) * rng.uniform(0.01, 50, (N, 1))).astype(DTYPES[dtype])
    q, scales = nki.simulate(quantize_rows)(x)
    assert q.dtype == np.uint8 and q.shape == (N, D) and scales.shape == (N, 1)
    want_scale = reference_scales(x)
    np.testing.assert_allclose(scales, want_scale, rtol=1e-6)
    codes = as64(q.view(E4M3))
    assert np.all(np.abs(codes) <= FP8_MAX)
    # the row maximum maps to +-448 exactly, every code is the fp8 rounding of x / scale (one step of slack for
    # values that land on a rounding boundary in fp32)
    np.testing.assert_array_equal(np.abs(codes).max(axis=1), FP8_MAX)
    exact = as64(x) / want_scale
    step = np.maximum(2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 2.0**-6))) - 3), 2.0**-9)
    assert np.all(np.abs(codes - exact) <= step * 0.5 + 1e-9 * np.abs(exact)), np.max(np.abs(codes - exact) / step)


@pytest.mark.parametrize("out_dtype", [np.float32, ml_dtypes.bfloat16])
def test_round_trip(rng, out_dtype):
    x = rng.standard_normal((256, 128)).astype(np.float32) * 3
    q, scales = quantize_rows(x)
    y = nki.simulate(dequantize_rows)(q, scales, out_dtype)
    assert y.dtype == np.dtype(out_dtype)
    want = as64(q.view(E4M3)) * as64(scales)
    np.testing.assert_allclose(as64(y), want, rtol=1e-6 if out_dtype == np.float32 else 8e-3)
    # and fp8 keeps 3 mantissa bits: within 1/16 of each value relative to the row maximum
    assert np.all(np.abs(as64(y) - x) <= np.abs(x).max(axis=1, keepdims=True) / 16 + 1e-6)


def test_dequantize_with_nl_dtype(rng):
    x = rng.standard_normal((128, 32)).astype(np.float32)
    q, scales = quantize_rows(x)
    y = dequantize_rows(q, scales, nl.float32)
    np.testing.assert_allclose(y, as64(q.view(E4M3)) * as64(scales), rtol=1e-6)
