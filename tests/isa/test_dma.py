"""DMA instructions: dma_copy between memories (converting to the destination dtype, optionally accumulating)
and dma_transpose (the axis permutations the DMA engines perform), into SBUF."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import BF16, F16, F32, FLOAT_DTYPES, assert_close, f32, rand

P, F = 128, 48


@pytest.mark.parametrize("src_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dst_dtype", FLOAT_DTYPES)
def test_dma_copy_hbm_to_sbuf_to_hbm_converts_to_the_destination_dtype(src_dtype, dst_dtype):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=dst_dtype, buffer=nl.sbuf)
        assert nisa.dma_copy(dst=tile, src=a) is None
        nisa.dma_copy(dst=out, src=tile)
        return out

    a = rand((P, F), src_dtype, -3, 3, seed=1)
    got = kernel(a)
    assert got.dtype == dst_dtype
    np.testing.assert_array_equal(f32(got), f32(a).astype(dst_dtype).astype(F32))


def test_dma_copy_between_views_and_under_a_mask():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((P, 2 * F), dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.zeros((P, 2 * F), dtype=a.dtype)
        nisa.dma_copy(dst=tile[:, F:2 * F], src=a[:, 0:F])  # HBM -> a slice of an SBUF tile
        i_p = nl.arange(P)[:, None]
        nisa.dma_copy(dst=tile[:, 0:F], src=tile[:, F:2 * F], mask=(i_p < 32))  # SBUF -> SBUF, 32 partitions
        nisa.dma_copy(dst=out, src=tile)
        return out

    a = rand((P, F), BF16, seed=2)
    got = f32(kernel(a))
    np.testing.assert_array_equal(got[:, F:], f32(a))
    np.testing.assert_array_equal(got[:32, :F], f32(a[:32]))
    assert not got[32:, :F].any()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dma_copy_with_dst_rmw_add_accumulates_into_the_destination(dtype):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.load(a)
        nisa.dma_copy(dst=acc, src=b, dst_rmw_op=np.add, dge_mode=nisa.dge_mode.hwdge, oob_mode=nisa.oob_mode.skip)
        nl.store(out, acc)
        return out

    a, b = rand((P, F), dtype, seed=3), rand((P, F), dtype, seed=4)
    assert_close(kernel(a, b), f32(a).astype(np.float64) + f32(b), dtype)


def _expect_error(body, a, pattern):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        body(x, out)
        return out

    with pytest.raises(nki.NkiError, match=pattern):
        kernel(a)


@backend_independent
def test_dma_copy_rejects_different_shapes_naming_the_op():
    _expect_error(lambda x, out: nisa.dma_copy(dst=out[:, 0:8], src=x), rand((P, F)), r"nisa\.dma_copy.*'dst'.*'src'")


@backend_independent
def test_dma_copy_accumulates_only_with_add():
    _expect_error(lambda x, out: nisa.dma_copy(dst=out, src=x, dst_rmw_op=np.multiply), rand((P, F)),
                  r"nisa\.dma_copy.*dst_rmw_op")  # fmt: skip


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("from_hbm", [True, False], ids=["hbm", "sbuf"])
def test_dma_transpose_2d(from_hbm, dtype):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
        res = nisa.dma_transpose(a if from_hbm else nl.load(a))
        assert res.buffer == "sbuf"
        nl.store(out, res)
        return out

    a = rand((64, P), dtype, seed=5)
    np.testing.assert_array_equal(f32(kernel(a)), f32(a).T)


@pytest.mark.parametrize("shape, axes", [((4, 8, 16), (2, 1, 0)), ((2, 3, 4, 8), (3, 1, 2, 0))])
def test_dma_transpose_of_3d_and_4d_tensors(shape, axes):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(tuple(shape[k] for k in axes), dtype=nl.float16, buffer=nl.shared_hbm)
        nl.store(out, nisa.dma_transpose(a, axes=axes, dtype=nl.float16))
        return out

    a = rand(shape, F32, seed=6)
    np.testing.assert_array_equal(f32(kernel(a)), np.transpose(a, axes).astype(F16).astype(F32))


@backend_independent
def test_dma_transpose_rejects_a_permutation_the_dma_engines_do_not_do():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((4, 16, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.dma_transpose(a, axes=(0, 2, 1)))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.dma_transpose.*axes=\(0, 2, 1\).*\(2, 1, 0\)"):
        kernel(rand((4, 8, 16)))


# -- indirect DMA: rows named by an on-chip int32 tile (reference/nki.md §2.7 "Indirect DMA") ------------------------


def test_dma_copy_gathers_and_scatter_adds_through_an_index_tile():
    @nki.jit
    def kernel(table, idx, acc):
        out = nl.ndarray((P, F), dtype=table.dtype, buffer=nl.shared_hbm)
        ix = nl.load(idx)
        rows = nl.ndarray((P, F), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=table[ix, :])  # gather
        nisa.dma_copy(dst=out, src=rows)
        nisa.dma_copy(dst=acc[ix, :], src=rows, dst_rmw_op=np.add)  # scatter-add into a parameter, in place
        return out

    table = rand((200, F), F32, -2, 2, seed=5)
    idx = np.random.default_rng(6).integers(0, 50, size=(P, 1)).astype(np.int32)  # repeats: the adds sum
    acc = np.zeros((50, F), np.float32)
    want_acc = np.zeros((50, F), np.float64)
    np.add.at(want_acc, idx[:, 0], table[idx[:, 0]].astype(np.float64))
    got = kernel(table, idx, acc)
    np.testing.assert_array_equal(np.asarray(got), table[idx[:, 0]])
    assert_close(acc, want_acc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
def test_a_same_dtype_dma_round_trip_keeps_nan_payloads(dtype):
    # A copy moves bytes: the quiet and signalling NaNs below (both signs, payloads in the top and bottom mantissa
    # bits) come back bit for bit. (The reference holds bfloat16 tiles as fp32; ml_dtypes' cast back to bfloat16
    # made every NaN 0x7fc0 until numpy_ref/runtime._round_bf16.) On each backend, and on the simulator, whose
    # outputs are the reference's.
    bits = {BF16: [0x7F81, 0xFFA5, 0x7FC3, 0x7FFF], F16: [0x7C01, 0xFE23, 0x7E01, 0xFFFF],
            F32: [0x7F800001, 0xFFA50000, 0x7FC00003, 0x7FFFFFFF]}[dtype]  # fmt: skip
    raw = np.uint32 if dtype is F32 else np.uint16
    a = np.resize(np.array(bits, raw), (P, F)).view(dtype)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        nisa.dma_copy(dst=out, src=tile)
        return out

    for got in (kernel(a), kernel(a, backend="simulator")):
        np.testing.assert_array_equal(np.asarray(got).view(raw), a.view(raw))
