"""GpSimd instructions: iota (an index expression as data), affine_select (a compile-time predicate over tile
positions, the causal mask of attention) and tensor_partition_reduce (a reduction across partitions)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import F32, FLOAT_DTYPES, assert_close, f32, rand, run_tiles

P, F = 128, 64


def _positions(shape):
    """Index grids over a tile of ``shape``, as np.indices gives them."""
    return np.indices(shape, dtype=np.int64)


@pytest.mark.parametrize("dtype", [nl.int32, nl.float32, nl.bfloat16, nl.float16])
def test_iota_of_an_affine_expression_over_partitions_and_free_axis(dtype):
    @nki.jit
    def kernel():
        out = nl.ndarray((P, F), dtype=dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:P, 0:F]
        nl.store(out, nisa.iota(3 * i_p - 2 * i_f + 5, dtype=dtype))
        return out

    p, f = _positions((P, F))
    np.testing.assert_array_equal(kernel(), (3 * p - 2 * f + 5).astype(np.float32).astype(dtype))


def test_iota_broadcasts_aranges_and_follows_loop_indices():
    @nki.jit
    def kernel():
        out = nl.ndarray((4 * P, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        for t in nl.affine_range(4):
            expr = (nl.arange(P)[:, None] + t * P) * 8 + nl.arange(8)[None, :]
            nl.store(out[nl.ds(t * P, P), :], nisa.iota(expr, dtype=nl.int32))
        return out

    # Row-major element numbers of the [4P, 8] output.
    np.testing.assert_array_equal(kernel(), np.arange(4 * P * 8).reshape(4 * P, 8))


def test_iota_over_a_3d_tile():
    @nki.jit
    def kernel():
        out = nl.ndarray((P, 4, 16), dtype=nl.int32, buffer=nl.shared_hbm)
        i_p, i_a, i_b = nl.mgrid[0:P, 0:4, 0:16]
        nl.store(out, nisa.iota(i_p * 100 + i_a * 16 - i_b, dtype=nl.int32))
        return out

    p, a, b = _positions((P, 4, 16))
    np.testing.assert_array_equal(kernel(), p * 100 + a * 16 - b)


@backend_independent
def test_iota_needs_an_index_expression_and_names_the_op():
    @nki.jit
    def kernel():
        out = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, nisa.iota(nl.arange(P), dtype=nl.int32))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.iota.*rank 1"):
        kernel()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_affine_select_causal_mask(dtype):
    data = rand((P, F), dtype, seed=1)

    def body(x):
        i_q, i_k = nl.arange(P)[:, None], nl.arange(F)[None, :]
        return nisa.affine_select(i_q >= i_k, x, -1e4)

    q, k = _positions((P, F))
    assert_close(run_tiles(body, data), np.where(q >= k, f32(data), -1e4), dtype, rtol=0, atol=0)


def test_affine_select_masks_psum_scores_of_diagonal_tiles_with_loop_offsets():
    # reference/nki.md §4.2: per (query tile, key tile), keep key positions <= query position, PSUM -> SBUF.
    n = 2 * P
    q_t, k_t = rand((P, n), seed=2), rand((P, n), seed=3)

    @nki.jit
    def kernel(q, k):
        out = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
        i_q, i_k = nl.arange(P)[:, None], nl.arange(P)[None, :]
        for qi in nl.affine_range(n // P):
            for ki in nl.affine_range(n // P):
                scores = nisa.nc_matmul(nl.load(q[:, nl.ds(qi * P, P)]), nl.load(k[:, nl.ds(ki * P, P)]))
                masked = nisa.affine_select(qi * P + i_q >= ki * P + i_k, scores, nl.fp32.min)
                assert masked.buffer == "sbuf"
                nl.store(out[nl.ds(qi * P, P), nl.ds(ki * P, P)], masked)
        return out

    q, k = _positions((n, n))
    expected = np.where(q >= k, f32(q_t).T.astype(np.float64) @ f32(k_t), np.finfo(F32).min)
    assert_close(kernel(q_t, k_t), expected, F32, rtol=1e-5, atol=1e-5)


def test_affine_select_with_a_combined_band_predicate():
    # A sliding window: q - 8 < k <= q, two conditions joined with &.
    data = rand((P, P), seed=4)

    def body(x):
        i_q, i_k = nl.arange(P)[:, None], nl.arange(P)[None, :]
        return nisa.affine_select((i_q >= i_k) & (i_k > i_q - 8), x, 0.0)

    q, k = _positions((P, P))
    np.testing.assert_array_equal(run_tiles(body, data), np.where((q >= k) & (k > q - 8), data, 0.0))


@backend_independent
def test_affine_select_predicate_must_fit_the_tile():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_q, i_k = nl.arange(P)[:, None], nl.arange(2 * F)[None, :]
        nl.store(out, nisa.affine_select(i_q >= i_k, nl.load(a), 0.0))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.affine_select.*pred.*does not match"):
        kernel(rand((P, F)))


REDUCTIONS = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("shape", [(P, F), (32, 4, 8)])
def test_tensor_partition_reduce(op, shape, dtype):
    lo, hi = (0.9, 1.1) if op == "multiply" else (-1.0, 2.0)
    data = rand(shape, dtype, lo, hi, seed=5)
    got = run_tiles(lambda x: nisa.tensor_partition_reduce(op, x), data)
    expected = REDUCTIONS[op](f32(data).astype(np.float64), axis=0, keepdims=True)
    assert got.shape == expected.shape
    assert_close(got, expected, dtype, atol=1e-5 if dtype == F32 else None)
