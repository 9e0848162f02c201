"""Tensor views of the current API beyond slicing (reference/nki.md §2.7 "Views"): ``.permute`` (on-chip the
partition axis stays first) and ``.select(dim, int)``, against NumPy's transpose and indexing on the NumPy
reference, the JAX backend and the simulator; the refusals say why."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl

A = np.arange(4 * 3 * 5, dtype=np.float32).reshape(4, 3, 5)


@nki.jit
def permuted(a):
    P, X, Y = a.shape
    out = nl.ndarray((P, Y, X), a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray((P, Y, X), a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t.permute(0, 2, 1))  # an on-chip view with its free axes swapped
    nisa.dma_copy(dst=out, src=u)
    return out


@nki.jit
def selected(a):
    out = nl.ndarray((a.shape[2], a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    col = nl.ndarray((a.shape[2], 1), a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((a.shape[2], a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.permute((2, 1, 0)).select(2, 1))  # an HBM view: any axis order
    c = nl.ndarray((a.shape[2], 1), a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=c, src=t.select(1, -1))  # an on-chip free axis: kept as size 1
    nisa.dma_copy(dst=out, src=t)
    nisa.dma_copy(dst=col, src=c)
    return out, col


def _run(kernel, backend, *args):
    return nki.simulate(kernel)(*args) if backend == "simulator" else kernel(*args, backend=backend)


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_permute_and_select_are_views(backend):
    np.testing.assert_array_equal(_run(permuted, backend, A), A.transpose(0, 2, 1))
    out, col = _run(selected, backend, A)
    np.testing.assert_array_equal(out, A.transpose(2, 1, 0)[:, :, 1])
    np.testing.assert_array_equal(col, A.transpose(2, 1, 0)[:, -1:, 1])


@pytest.mark.parametrize(("view", "message"), [
    (lambda t: t.permute(1, 0, 2), "moves the partition axis of an on-chip tensor"),
    (lambda t: t.permute(0, 1), r"not a permutation of the 3 axes"),
    (lambda t: t.select(0, 1), "cannot take the partition axis"),
    (lambda t: t.select(1, t[0:1, 0:1, 0]), "select's index must be a register .* must hold an integer, not float32"),
])  # fmt: skip
def test_view_refusals(view, message):
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        view(t)
        return a

    with pytest.raises(nki.NkiError, match=message):
        k(A)


@pytest.mark.parametrize("name", ["slice", "broadcast", "rearrange", "expand_dim", "squeeze_dim", "reshape_dim",
                                  "flatten_dims", "vector_select"])
def test_view_methods_without_a_documented_signature_are_refused_at_the_kernel_line(name):
    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        getattr(t, name)(1)
        return a

    # the line, the method and the reason, not a bare AttributeError; hasattr still says the method is absent
    with pytest.raises(nki.NkiError, match=rf"test_views.py:\d+: t.{name}: not modelled by nki_dsl: \S"):
        k(A)
    with pytest.raises(AttributeError, match="not modelled"):
        k(A)


def test_a_misspelt_tensor_attribute_is_a_plain_attribute_error():
    @nki.jit
    def k(a):
        assert not hasattr(a, "flatten_dims") and not hasattr(a, "shpe")
        a.shpe  # noqa: B018
        return a

    with pytest.raises(AttributeError, match="has no attribute 'shpe'") as info:
        k(A)
    assert not isinstance(info.value, nki.NkiError)
