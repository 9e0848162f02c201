import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from group_norm import group_norm


def reference(x, gamma, beta, G, eps):
    x = as64(x)
    N, C = x.shape
    xg = x.reshape(N, G, C // G)
    mean = xg.mean(axis=2, keepdims=True)
    var = xg.var(axis=2, keepdims=True)
    return ((xg - mean) / np.sqrt(var + eps)).reshape(N, C) * as64(gamma) + as64(beta)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("N,C,G", [
    (128, 256, 4),   # groups of 64
    (300, 1536, 2),  # groups of 768: a full 512 chunk and a ragged 256 one; ragged token tile
    (64, 96, 3),     # odd group width
])
def test_group_norm(rng, dtype, N, C, G):
    x = (rng.standard_normal((N, C)) * 2 + 0.5).astype(DTYPES[dtype])
    gamma = rng.uniform(0.5, 1.5, C).astype(np.float32)
    beta = rng.standard_normal(C).astype(np.float32)
    y = nki.simulate(group_norm)(x, gamma, beta, G)
    np.testing.assert_allclose(as64(y), reference(x, gamma, beta, G, 1e-5), **TOLERANCE[dtype])


def test_group_norm_eps_matters(rng):
    x = np.full((128, 64), 3.0, np.float32)
    x[:, ::2] += 1e-3  # variance 2.5e-7, comparable to eps
    gamma, beta = np.ones(64, np.float32), np.zeros(64, np.float32)
    for eps in (1e-6, 1e-3):
        y = nki.cpu_simulate(group_norm)(x, gamma, beta, 2, eps=eps)
        np.testing.assert_allclose(y, reference(x, gamma, beta, 2, eps), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("N,C,G", [(128, 256, 4), (300, 1536, 2), (64, 96, 3)])
def test_legacy_twin_gives_the_same_numbers(rng, N, C, G):
    from group_norm import group_norm_legacy
    from neuronxcc import nki as legacy_nki

    x = (rng.standard_normal((N, C)) * 2 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, C).astype(np.float32)
    beta = rng.standard_normal(C).astype(np.float32)
    old = legacy_nki.simulate_kernel(group_norm_legacy, x, gamma, beta, G)
    np.testing.assert_allclose(old, reference(x, gamma, beta, G, 1e-5), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(group_norm(x, gamma, beta, G), old, rtol=1e-6, atol=1e-6)
