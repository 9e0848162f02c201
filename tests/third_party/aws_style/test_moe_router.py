import nki
import numpy as np
import pytest
from conftest import DTYPES, as64
from moe_router import topk_router


def distinct_logits(rng, T, E):
    # a random permutation per row: no ties, so the top-k order is unambiguous
    return np.stack([rng.permutation(E) for _ in range(T)]).astype(np.float32) * 0.125 - E / 16


def reference(logits, x, k):
    lg = as64(logits)
    order = np.argsort(-lg, axis=1, kind="stable")[:, :k]
    kept = np.take_along_axis(lg, order, axis=1)
    e = np.exp(kept - kept[:, :1])
    gates = e / e.sum(axis=1, keepdims=True)
    T, E = lg.shape
    dispatched = np.zeros((E * T, x.shape[1]))
    dispatched[order[:, 0] * T + np.arange(T)] = as64(x)
    return order, gates, dispatched


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("T,E,H,k", [(128, 8, 64, 2), (128, 64, 16, 4),
                                     pytest.param(256, 16, 32, 8, marks=pytest.mark.slow)])
def test_topk_router(rng, dtype, T, E, H, k):
    logits = distinct_logits(rng, T, E)
    x = rng.standard_normal((T, H)).astype(DTYPES[dtype])
    ids, gates, dispatched = nki.simulate(topk_router)(logits, x, k)
    want_ids, want_gates, want_dispatched = reference(logits, x, k)
    assert ids.dtype == np.int32 and ids.shape == (T, k)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(gates, want_gates, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(as64(dispatched), want_dispatched)  # a copy: bit exact


def test_topk_router_gates_sum_to_one(rng):
    logits = distinct_logits(rng, 128, 32)
    x = np.ones((128, 8), np.float32)
    _, gates, dispatched = topk_router(logits, x, 8)
    np.testing.assert_allclose(gates.sum(axis=1), 1.0, rtol=1e-5)
    assert dispatched.sum() == 128 * 8  # every token landed exactly once
