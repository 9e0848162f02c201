"""The destination-passing ``nisa`` instructions no other current-API test calls (``activation_reduce``,
``bn_stats``/``bn_aggr``, ``dma_transpose``, ``tensor_scalar_reduce``, ``tensor_copy_predicated``), against float64
NumPy formulas on the NumPy reference and the simulator."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from tests.current_api.kernel_io import out as _out
from tests.current_api.kernel_io import sbuf as _sbuf

RNG = np.random.default_rng(11)
X = RNG.uniform(-2, 2, (128, 64)).astype(np.float32)




def _run(kernel, backend, *args):
    return kernel(*args) if backend == "numpy" else nki.simulate(kernel)(*args)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_activation_reduce_and_tensor_scalar_reduce(backend):
    @nki.jit
    def k(x):
        t = _sbuf(x)
        act, act_max = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((128, 1), nl.float32)
        nisa.activation_reduce(dst=act, op=nl.tanh, data=t, reduce_op=nl.maximum, reduce_res=act_max, scale=0.5)
        sub, sub_sum = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf), nl.ndarray((128, 1), nl.float32)
        nisa.tensor_scalar_reduce(dst=sub, data=t, op0=nl.subtract, operand0=1.0, reduce_op=nl.add,
                                  reduce_res=sub_sum, reduce_res_negate=True)  # fmt: skip
        return _out(act), _out(act_max), _out(sub), _out(sub_sum)

    act, act_max, sub, sub_sum = _run(k, backend, X)
    x = X.astype(np.float64)
    np.testing.assert_allclose(act, np.tanh(0.5 * x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(act_max[:, 0], np.tanh(0.5 * x).max(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(sub, X - np.float32(1.0))
    np.testing.assert_allclose(sub_sum[:, 0], -(x - 1.0).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_bn_stats_then_bn_aggr_give_mean_and_variance(backend):
    @nki.jit
    def k(x):
        stats = nl.ndarray((128, 6), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=_sbuf(x))
        mean_var = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        return _out(stats), _out(mean_var)

    stats, mean_var = _run(k, backend, X)
    x = X.astype(np.float64)
    even, odd = x[:, 0::2], x[:, 1::2]
    want = np.stack([np.full(128, 32.0), even.mean(1), even.var(1) * 32, np.full(128, 32.0), odd.mean(1),
                     odd.var(1) * 32], axis=1)  # fmt: skip
    np.testing.assert_allclose(stats, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean_var, np.stack([x.mean(1), x.var(1)], axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_dma_transpose_and_tensor_copy_predicated(backend):
    @nki.jit
    def k(x, keep):
        tr = nl.ndarray((64, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=tr, src=x)  # straight from HBM
        t, pred = _sbuf(x), _sbuf(keep)
        picked = nl.ndarray(t.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=picked, value=-5.0)
        nisa.tensor_copy_predicated(dst=picked, src=t, predicate=pred)  # elsewhere picked keeps -5
        other = nl.ndarray(t.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=other, value=7.0)
        nisa.tensor_copy_predicated(dst=other, src=t, predicate=pred, reverse_pred=True)
        return _out(tr), _out(picked), _out(other)

    keep = (RNG.uniform(size=X.shape) < 0.5).astype(np.uint8)
    tr, picked, other = _run(k, backend, X, keep)
    np.testing.assert_array_equal(tr, X.T)
    np.testing.assert_array_equal(picked, np.where(keep != 0, X, -5.0))
    np.testing.assert_array_equal(other, np.where(keep == 0, X, 7.0))
