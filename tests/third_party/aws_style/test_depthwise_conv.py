import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from depthwise_conv import depthwise_conv1d


def reference(x, w, bias, stride, dilation):
    x, w, bias = as64(x), as64(w), as64(bias)
    B, C, L = x.shape
    K = w.shape[1]
    Lout = (L - dilation * (K - 1) - 1) // stride + 1
    out = np.broadcast_to(bias[None, :, :], (B, C, Lout)).copy()
    for k in range(K):
        out += w[None, :, k:k + 1] * x[:, :, k * dilation:k * dilation + stride * (Lout - 1) + 1:stride]
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("B,C,L,K,stride,dilation", [
    (2, 64, 100, 3, 1, 1),
    (1, 200, 64, 4, 1, 2),   # ragged channel tile
    (1, 128, 129, 5, 2, 1),  # strided output
])
def test_depthwise_conv1d(rng, dtype, B, C, L, K, stride, dilation):
    dt = DTYPES[dtype]
    x = rng.standard_normal((B, C, L)).astype(dt)
    w = rng.standard_normal((C, K)).astype(np.float32)
    bias = rng.standard_normal((C, 1)).astype(np.float32)
    out = nki.simulate(depthwise_conv1d)(x, w, bias, stride=stride, dilation=dilation)
    want = reference(x, w, bias, stride, dilation)
    assert out.shape == want.shape and out.dtype == x.dtype
    np.testing.assert_allclose(as64(out), want, **TOLERANCE[dtype])


def test_depthwise_conv1d_identity_tap(rng):
    x = rng.standard_normal((1, 16, 40)).astype(np.float32)
    w = np.zeros((16, 3), np.float32)
    w[:, 1] = 1.0  # the middle tap alone shifts the signal by one
    out = depthwise_conv1d(x, w, np.zeros((16, 1), np.float32))
    np.testing.assert_array_equal(out, x[:, :, 1:39])


@pytest.mark.parametrize("B,C,L,K,stride,dilation", [(2, 64, 100, 3, 1, 1), (1, 200, 64, 4, 1, 2),
                                                      (1, 128, 129, 5, 2, 1)])
def test_legacy_twin_gives_the_same_numbers(rng, B, C, L, K, stride, dilation):
    from depthwise_conv import depthwise_conv1d_legacy
    from neuronxcc import nki as legacy_nki

    x = rng.standard_normal((B, C, L)).astype(np.float32)
    w = rng.standard_normal((C, K)).astype(np.float32)
    bias = rng.standard_normal((C, 1)).astype(np.float32)
    old = legacy_nki.simulate_kernel(depthwise_conv1d_legacy, x, w, bias, stride=stride, dilation=dilation)
    np.testing.assert_allclose(old, reference(x, w, bias, stride, dilation), rtol=1e-5, atol=1e-5)
    new = depthwise_conv1d(x, w, bias, stride=stride, dilation=dilation)
    np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-6)
