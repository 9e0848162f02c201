"""The current-API instructions built from several legacy instructions (nki_dsl/current/isa/composed.py),
against NumPy formulas of their documented semantics (reference/nki.md §2.7), on both backends."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from tests.current_api.kernel_io import out as _out
from tests.current_api.kernel_io import sbuf as _sbuf

RNG = np.random.default_rng(11)
A = RNG.uniform(-2, 2, (128, 64)).astype(np.float32)
B = RNG.uniform(-1, 1, (128, 64)).astype(np.float32)
COL = RNG.uniform(-1, 1, (128, 1)).astype(np.float32)
BACKENDS = ["numpy", "simulator"]




def run(kernel, backend, *args):
    return kernel(*args) if backend == "numpy" else nki.simulate(kernel)(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_scalar_cumulative(backend):
    @nki.jit
    def k(a):
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=r, src=_sbuf(a), op0=nl.multiply, op1=nl.add, imm0=2.0)
        m = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=m, src=_sbuf(a), op0=nl.add, op1=nl.maximum, imm0=0.5, imm1=1.0,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce)
        return _out(r), _out(m)

    r, m = run(k, backend, A)
    np.testing.assert_allclose(r, np.cumsum(2.0 * A.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, np.maximum.accumulate(np.concatenate([np.ones((128, 1)), A + 0.5], 1), 1)[:, 1:])


@pytest.mark.parametrize("backend", BACKENDS)
def test_exponential_with_row_sums(backend):
    @nki.jit
    def k(a, col):
        e = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=e, src=_sbuf(a), max_value=_sbuf(col), reduce_res=s,
                         reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=10.0)
        e2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=e2, src=_sbuf(a), max_value=1.5)
        return _out(e), _out(s), _out(e2)

    e, s, e2 = run(k, backend, A, COL)
    ref = np.exp(A.astype(np.float64) - COL)
    np.testing.assert_allclose(e, ref, rtol=1e-6)
    np.testing.assert_allclose(s[:, 0], 10.0 + ref.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(e2, np.exp(A.astype(np.float64) - 1.5), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_select_reduce(backend):
    pred = (A > 0).astype(np.uint8)

    @nki.jit
    def k(a, pred, col):
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=d, predicate=_sbuf(pred), on_true=_sbuf(a), on_false=_sbuf(col), reduce_res=mx,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum)
        d2 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=d2, predicate=_sbuf(pred), on_true=_sbuf(a), on_false=-7.0, reverse_pred=True)
        return _out(d), _out(mx), _out(d2)

    d, mx, d2 = run(k, backend, A, pred, COL)
    ref = np.where(pred != 0, A, np.broadcast_to(COL, A.shape))
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(mx[:, 0], ref.max(axis=1))
    np.testing.assert_array_equal(d2, np.where(pred == 0, A, -7.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_range_select_masks_columns_outside_per_row_bounds(backend):
    lo = RNG.integers(0, 80, (128, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 40, (128, 1)).astype(np.float32)

    @nki.jit
    def k(a, lo, hi):
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=d, on_true_tile=_sbuf(a), comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=_sbuf(lo), bound1=_sbuf(hi), reduce_res=mx, range_start=16)
        return _out(d), _out(mx)

    d, mx = run(k, backend, A, lo, hi)
    j = 16 + np.arange(64)[None, :]
    keep = (j >= lo) & (j < hi)
    ref = np.where(keep, A, np.float32(-3.4028235e38))
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(mx[:, 0], ref.max(axis=1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dma_compute_sums_sources(backend):
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, _sbuf(b), a], reduce_op=nl.add)
        return out

    np.testing.assert_allclose(run(k, backend, A, B), A.astype(np.float64) * 2 + B, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nc_stream_shuffle(backend):
    mask = [(i * 7) % 32 for i in range(32)]
    mask[3] = 255

    @nki.jit
    def k(a):
        d = _sbuf(a)  # partitions left by 255 keep their values
        nisa.nc_stream_shuffle(dst=d, src=_sbuf(a), shuffle_mask=mask)
        return _out(d)

    got = run(k, backend, B)
    src_rows = [i if mask[i % 32] == 255 else i // 32 * 32 + mask[i % 32] for i in range(128)]
    np.testing.assert_array_equal(got, B[src_rows])


def test_shared_identity_matrix():
    @nki.jit
    def k(a):
        eye = nl.shared_identity_matrix(128, dtype=nl.float32)
        p = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=eye, moving=_sbuf(a))  # I.T @ a == a
        r = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=p)
        return _out(r)

    x = RNG.uniform(-1, 1, (128, 128)).astype(np.float32)
    np.testing.assert_array_equal(k(x), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max8_then_find_index8_is_a_top8(backend):
    x = RNG.integers(-20, 20, (128, 96)).astype(np.float32)  # many duplicates
    x[:, 5] = x[:, 9] = 50.0  # the row max twice

    @nki.jit
    def k(x):
        t = _sbuf(x)
        top = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=t)
        idx = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=t, vals=top)
        return _out(top), _out(idx)

    top, idx = run(k, backend, x)
    ref_top = -np.sort(-x, axis=1)[:, :8]
    np.testing.assert_array_equal(top, ref_top)
    # indices: the k-th copy of a value is its k-th occurrence in the row
    for p in range(128):
        seen = {}
        for j, v in enumerate(ref_top[p]):
            occ = np.flatnonzero(x[p] == v)
            assert idx[p, j] == occ[seen.get(v, 0)]
            seen[v] = seen.get(v, 0) + 1
    assert idx[0, 0] == 5 and idx[0, 1] == 9


def test_find_index8_of_absent_values_is_all_ones():
    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    vals = np.full((128, 8), -1.0, np.float32)
    vals[:, 0] = x[:, 3]

    @nki.jit
    def k(x, vals):
        idx = nl.ndarray((128, 8), nl.uint16, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=_sbuf(x), vals=_sbuf(vals))
        return _out(idx)

    idx = k(x, vals)
    assert (idx[:, 0] == 3).all() and (idx[:, 1:] == 0xFFFF).all()
