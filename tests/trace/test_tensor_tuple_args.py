"""A tuple of tensors as one kernel argument (``kernel((w1, w2, w3), x)``; NKI 0.3+ takes sequence arguments as
tuples, reference/nki.md §2.6): each item is an HBM parameter ``name_k`` of the IR, the body gets the tuple of
their tensors, the cache key holds each item's shape and dtype, and written items are updated in place."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as cnki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as cnl
import nki_dsl.language as nl
from nki_dsl.errors import NkiApiError

X = np.arange(128 * 16, dtype=np.float32).reshape(128, 16) / 100


@cnki.jit
def weighted_sum(xs, weights):
    out = cnl.ndarray(xs[0].shape, xs[0].dtype, buffer=cnl.shared_hbm)
    acc = cnl.ndarray(xs[0].shape, cnl.float32, buffer=cnl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for x, w in zip(xs, weights):
        t = cnl.ndarray(x.shape, x.dtype, buffer=cnl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.scalar_tensor_tensor(dst=acc, data=t, op0=cnl.multiply, operand0=w, op1=cnl.add, operand1=acc)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki_dsl.jit
def scale_each(xs, factor):
    for x in xs:  # legacy front end: written in place
        nl.store(x, value=nl.multiply(nl.load(x), factor))


def test_a_tuple_of_tensors_is_one_parameter_per_item():
    xs = (X, 2 * X, 3 * X)
    np.testing.assert_allclose(weighted_sum(xs, (1.0, 0.5, -1.0)), X + X - 3 * X, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cnki.simulate(weighted_sum)(xs, (1.0, 0.5, -1.0)), -X, rtol=1e-6, atol=1e-6)
    ir = nki_dsl.trace(weighted_sum, xs, (1.0, 0.5, -1.0)).ir
    assert [p.name for p in ir.params] == ["xs_0", "xs_1", "xs_2"]


def test_the_cache_key_holds_each_items_shape():
    weighted_sum((X, X), (1.0, 1.0))
    before = weighted_sum.trace_count
    weighted_sum((X + 1, X), (1.0, 1.0))  # same shapes: the trace is reused
    assert weighted_sum.trace_count == before
    np.testing.assert_allclose(weighted_sum((X[:, :8], X[:, :8]), (1.0, 1.0)), 2 * X[:, :8], rtol=1e-6)
    assert weighted_sum.trace_count == before + 1


def test_written_items_are_updated_in_place():
    a, b = X.copy(), (2 * X).copy()
    assert scale_each((a, b), 3.0) is None
    np.testing.assert_allclose(a, 3 * X, rtol=1e-6)
    np.testing.assert_allclose(b, 6 * X, rtol=1e-6)


def test_an_item_name_that_is_also_a_parameter_is_refused():
    @cnki.jit
    def clash(xs, xs_1):
        return xs_1

    with pytest.raises(NkiApiError, match="item 1 of the tuple argument 'xs' is the HBM parameter 'xs_1'"):
        clash((X, X), X)
