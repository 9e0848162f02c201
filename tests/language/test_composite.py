"""``nl.softmax`` and ``nl.rms_norm``: legacy functions built from op-table ops, computed in fp32 and rounded
once to the result dtype."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand


@nki.jit
def softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.softmax(nl.load(x), axis=1))
    return out


@nki.jit
def rms_norm_kernel(x, w):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=x.shape[1]))
    return out


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
def test_softmax(dtype):
    x = rand((128, 256), dtype, -4, 4, seed=1)
    e = np.exp(exact(x) - exact(x).max(axis=1, keepdims=True))
    got = softmax_kernel(x)
    # fp32 exp, sum and reciprocal each round: a few fp32 ulps before the final rounding.
    assert_ulps(got, e / e.sum(axis=1, keepdims=True), dtype, ulps=8 if dtype == F32 else 1, what="nl.softmax")
    assert np.allclose(exact(got).sum(axis=1), 1.0, atol=256 * 2.0**-8)


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
def test_rms_norm(dtype):
    x, w = rand((128, 256), dtype, -2, 2, seed=2), rand((1, 256), dtype, 0.5, 1.5, seed=3)
    want = exact(x) / np.sqrt(np.mean(exact(x) ** 2, axis=1, keepdims=True) + 1e-6) * exact(w)
    assert_ulps(rms_norm_kernel(x, w), want, dtype, ulps=8 if dtype == F32 else 1, what="nl.rms_norm")
