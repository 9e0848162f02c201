import nki
import numpy as np
import pytest
from conftest import DTYPES, as64
from linear_gelu import linear_gelu_residual, mlp_block, scaled_copy


def gelu_tanh(z):
    return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))


def reference(x, w, b, res):
    return gelu_tanh(as64(x) @ as64(w) + as64(b)) + as64(res)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("T,K,N", [(128, 256, 512), (256, 128, 256), (128, 128, 1024)])
def test_linear_gelu_residual(rng, dtype, T, K, N):
    dt = DTYPES[dtype]
    x = rng.standard_normal((T, K)).astype(dt)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(dt)
    b = rng.standard_normal(N).astype(dt)
    res = rng.standard_normal((T, N)).astype(dt)
    y = nki.simulate(linear_gelu_residual)(x, w, b, res)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=5e-2, atol=5e-2)
    np.testing.assert_allclose(as64(y), reference(x, w, b, res), **tol)


def test_plain_function_over_kernels(rng):
    x = rng.standard_normal((128, 128)).astype(np.float32)
    w1, w2 = (rng.standard_normal((2, 128, 128)) / 12).astype(np.float32)
    b1, b2 = rng.standard_normal((2, 128)).astype(np.float32)
    y = nki.simulate(mlp_block)(x, w1, b1, w2, b2)
    h = reference(x, w1, b1, x)
    np.testing.assert_allclose(y, reference(h, w2, b2, h), rtol=1e-4, atol=1e-4)


def test_device_print_and_options(rng, capsys):
    x = rng.standard_normal((128, 8)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(scaled_copy)(x, 3.0), 3 * as64(x), rtol=1e-6)
    assert "scaled_copy input" in capsys.readouterr().out
