import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from gqa_attention import gqa_causal_attention


def reference(q, k, v, scale):
    q, k, v = as64(q), as64(k), as64(v)
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    S = q.shape[2]
    s = np.where(np.tril(np.ones((S, S), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("B,HQ,HKV,S,D", [(1, 4, 2, 256, 64), (2, 2, 1, 128, 128)])
def test_gqa_causal_attention_simulated(rng, dtype, B, HQ, HKV, S, D):
    dt = DTYPES[dtype]
    q = rng.standard_normal((B, HQ, S, D)).astype(dt)
    k = rng.standard_normal((B, HKV, S, D)).astype(dt)
    v = rng.standard_normal((B, HKV, S, D)).astype(dt)
    out = nki.simulate(gqa_causal_attention)(q, k, v)
    assert out.shape == q.shape and out.dtype == q.dtype
    np.testing.assert_allclose(as64(out), reference(q, k, v, 1 / np.sqrt(D)), **TOLERANCE[dtype])


def test_gqa_causal_attention_scale_keyword(rng):
    q = rng.standard_normal((1, 2, 384, 32)).astype(np.float32)
    k = rng.standard_normal((1, 1, 384, 32)).astype(np.float32)
    v = rng.standard_normal((1, 1, 384, 32)).astype(np.float32)
    out = nki.cpu_simulate(gqa_causal_attention)(q, k, v, softmax_scale=0.25)
    np.testing.assert_allclose(out, reference(q, k, v, 0.25), **TOLERANCE["float32"])


@pytest.mark.slow
def test_gqa_causal_attention_long(rng):
    q = rng.standard_normal((1, 8, 512, 128)).astype(np.float32)
    k = rng.standard_normal((1, 2, 512, 128)).astype(np.float32)
    v = rng.standard_normal((1, 2, 512, 128)).astype(np.float32)
    out = gqa_causal_attention(q, k, v)
    np.testing.assert_allclose(out, reference(q, k, v, 1 / np.sqrt(128)), **TOLERANCE["float32"])
