import nki
import numpy as np
import pytest
from neuronxcc import nki as legacy_nki
from sampling import sample_partials_legacy, sample_tokens


def inputs(rng, B, V, greedy):
    logits = rng.standard_normal((B, V)).astype(np.float32)
    if greedy:
        noise = np.zeros((B, V), np.float32)
    else:
        u = rng.uniform(1e-6, 1 - 1e-6, (B, V))
        noise = (-np.log(-np.log(u))).astype(np.float32)
    return logits, noise


def reference(logits, noise, t):
    # the kernel computes in fp32: rank the fp32 scores (argmax takes the first of ties)
    score = (logits.astype(np.float32) * np.float32(1.0 / t)).astype(np.float32) + noise
    return np.argmax(score, axis=1).astype(np.int32)[:, None]


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("B,V", [(256, 320), (512, 64), pytest.param(256, 4000, marks=pytest.mark.slow)])
def test_sample_tokens(rng, lnc, greedy, B, V):
    logits, noise = inputs(rng, B, V, greedy)
    tokens = nki.simulate(sample_tokens[lnc])(logits, noise, 0.7)
    assert tokens.dtype == np.int32 and tokens.shape == (B, 1)
    np.testing.assert_array_equal(tokens, reference(logits, noise, 0.7))


def test_sample_tokens_direct_launch_on_two_cores(rng):
    logits, noise = inputs(rng, 256, 512, greedy=True)
    np.testing.assert_array_equal(sample_tokens[2](logits, noise, 1.0), reference(logits, noise, 1.0))


@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("B,V,shards", [(256, 256, 4), (128, 512, 2),
                                        pytest.param(512, 2048, 8, marks=pytest.mark.slow)])
def test_legacy_partials_on_a_2d_grid(rng, greedy, B, V, shards):
    logits, noise = inputs(rng, B, V, greedy)
    vals, idx = legacy_nki.simulate_kernel(sample_partials_legacy[B // 128, shards], logits, noise, 0.7)
    assert vals.shape == (shards, B, 1)
    best = np.argmax(vals[:, :, 0], axis=0)  # host-side reduction over the shards
    tokens = idx[best, np.arange(B), 0].astype(np.int32)[:, None]
    np.testing.assert_array_equal(tokens, reference(logits, noise, 0.7))
    # the 0.6 kernel agrees
    np.testing.assert_array_equal(tokens, nki.simulate(sample_tokens)(logits, noise, 0.7))
