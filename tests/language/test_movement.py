"""Data movement: load (with dtype= and mask=), store, copy, load_transpose2d, transpose, broadcast_to,
expand_dims, in-place writes and accumulation into SBUF tensors, and HBM reshape. Moves are exact, except a
dtype change, which rounds once to nearest even."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand, rounded


@nki.jit
def load_store_kernel(x, load_dtype, out_dtype):
    out = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x, dtype=load_dtype))
    return out


# (HBM dtype, load dtype=, output HBM dtype): each conversion rounds once; none may go through another type.
CONVERSIONS = [(F32, None, F32), (F32, BF16, F32), (F32, F16, F32), (F32, None, BF16), (BF16, F32, F16),
               (F16, None, BF16), (F32, F16, BF16)]  # fmt: skip


@pytest.mark.parametrize(("src", "load_dtype", "dst"), CONVERSIONS, ids=lambda d: getattr(d, "name", "none"))
def test_load_store_conversions(src, load_dtype, dst):
    # Values spanning magnitudes, with more bits than bf16/fp16 hold.
    x = (rand((128, 64), F32, 0.5, 1, seed=1, signed=True) * np.exp2(np.arange(-6, 10, 0.25))).astype(src)
    got = load_store_kernel(x, None if load_dtype is None else load_dtype.name, dst.name)
    want = exact(x) if load_dtype is None else exact(rounded(exact(x), load_dtype))
    assert_ulps(got, want, dst, ulps=0, what="load/store")


F8E4M3, F8E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


@pytest.mark.parametrize("fp8", [F8E4M3, F8E5M2], ids=["e4m3", "e5m2"])
def test_load_to_fp8(fp8):
    x = rand((128, 64), F32, 2.0**-4, 200, seed=11, signed=True)  # inside both formats' normal range
    got = load_store_kernel(x, "float8_e4m3" if fp8 == F8E4M3 else "float8_e5m2", "float32")
    assert_ulps(got, exact(rounded(exact(x), fp8)), F32, ulps=0, what="load(dtype=fp8)")


# Ties, values beyond each integer range, and NaN (the poison of unwritten float memory).
FLOAT_TO_INT = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e10, -1e10, 300.4, -7.6, 127.5, np.nan]


def _to_int(v: float, dtype) -> int:
    """Round to nearest even (Python's round), saturate to the range, NaN to 0."""
    info = np.iinfo(dtype)
    return 0 if np.isnan(v) else min(max(round(v), int(info.min)), int(info.max))


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.int8, np.uint8, np.uint32], ids=lambda d: d.__name__)
def test_load_float_to_int_rounds_and_saturates(dtype):
    x = np.tile(np.array(FLOAT_TO_INT, F32), (128, 1))
    got = load_store_kernel(x, np.dtype(dtype).name, np.dtype(dtype).name)
    want = [_to_int(float(v), dtype) for v in x[0]]
    np.testing.assert_array_equal(got, np.tile(np.array(want, dtype), (128, 1)))


@nki.jit
def masked_load_kernel(x, n_rows):
    """Rows >= n_rows are neither loaded nor stored; the unloaded rows of the tile are never written."""
    out_masked = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out_full = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0 : x.shape[0], 0 : x.shape[1]]
    tile = nl.load(x[i_p, i_f], mask=(i_p < n_rows))
    nl.store(out_masked[i_p, i_f], value=tile, mask=(i_p < n_rows))
    nl.store(out_full, value=tile)
    return out_masked, out_full


def test_masked_load_store_leaves_poison():
    x = rand((128, 32), F32, seed=2)
    masked, full = masked_load_kernel(x, 100)
    np.testing.assert_array_equal(masked[:100], x[:100])
    # Unwritten HBM and unwritten SBUF both read as NaN (memory is not zeroed).
    assert np.isnan(masked[100:]).all() and np.isnan(full[100:]).all()
    np.testing.assert_array_equal(full[:100], x[:100])


@nki.jit
def ragged_kernel(x):
    """The tiling idiom for a row count that is not a multiple of 128: the last tile is masked."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        nl.store(out[i_p, i_f], value=nl.exp(tile, mask=(i_p < rows)), mask=(i_p < rows))
    return out


def test_ragged_rows_with_masks():
    x = rand((300, 16), BF16, seed=3)
    assert_ulps(ragged_kernel(x), np.exp(exact(x)), BF16, what="masked exp")


@nki.jit
def transpose_kernel(x, how):
    if how == "load_transpose2d":
        result = nl.load_transpose2d(x)
    elif how == "transpose":
        result = nl.transpose(nl.load(x))
    else:  # through a bf16 result dtype: rounds once
        result = nl.transpose(nl.load(x), dtype=nl.bfloat16)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("how", ["load_transpose2d", "transpose", "transpose_bf16"])
def test_transposes(how, dtype):
    x = rand((64, 128), dtype, seed=4)
    got = transpose_kernel(x, how)
    out_dtype = BF16 if how == "transpose_bf16" else dtype
    assert_ulps(got, exact(x).T, out_dtype, ulps=0, what=how)


@nki.jit
def copy_kernel(x):
    t = nl.load(x)
    c = nl.copy(t)
    c16 = nl.copy(t, dtype=nl.bfloat16)
    out, out16 = (nl.ndarray(x.shape, dtype=d, buffer=nl.shared_hbm) for d in (x.dtype, nl.bfloat16))
    nl.store(out, value=c)
    nl.store(out16, value=c16)
    return out, out16


def test_copy():
    x = rand((128, 64), F32, seed=5)
    same, narrowed = copy_kernel(x)
    np.testing.assert_array_equal(same, x)
    assert_ulps(narrowed, exact(x), BF16, ulps=0, what="copy(dtype=bf16)")


@nki.jit
def broadcast_kernel(col, row, how):
    if how == "function":
        result = nl.broadcast_to(nl.load(col), shape=(128, 64))
    elif how == "method":
        result = nl.load(col).broadcast_to((128, 64))
    else:  # along the partition dimension
        result = nl.broadcast_to(nl.load(row), shape=(128, 64))
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@pytest.mark.parametrize("how", ["function", "method", "partition"])
def test_broadcast_to(how):
    col, row = rand((128, 1), BF16, seed=6), rand((1, 64), BF16, seed=7)
    got = broadcast_kernel(col, row, how)
    src = row if how == "partition" else col
    np.testing.assert_array_equal(got, np.broadcast_to(src, (128, 64)))


@nki.jit
def expand_dims_kernel(x, axis):
    result = nl.expand_dims(nl.load(x), axis)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@pytest.mark.parametrize("axis", [1, 2, -1, (1, 2)])
def test_expand_dims(axis):
    x = rand((128, 16), F16, seed=8)
    got = expand_dims_kernel(x, axis)
    want = np.expand_dims(x, axis)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@nki.jit
def in_place_kernel(x, out_dtype):
    """SBUF tensors declared outside an affine_range: slices written per iteration, and ``+=`` accumulation."""
    rows, cols = x.shape  # [128, 4 * w]
    w = cols // 4
    gathered = nl.ndarray((128, cols), dtype=out_dtype, buffer=nl.sbuf)
    total = nl.zeros((128, w), dtype=out_dtype, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        tile = nl.load(x[:, nl.ds(j * w, w)])
        gathered[:, nl.ds(j * w, w)] = tile
        total[...] += tile
    out_g = nl.ndarray((128, cols), dtype=out_dtype, buffer=nl.shared_hbm)
    out_t = nl.ndarray((128, w), dtype=out_dtype, buffer=nl.shared_hbm)
    nl.store(out_g, value=gathered)
    nl.store(out_t[...], value=total[...])
    return out_g, out_t


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_in_place_writes_and_sbuf_accumulation(dtype):
    x = rand((128, 64), BF16, seed=9)
    gathered, total = in_place_kernel(x, dtype.name)
    np.testing.assert_array_equal(gathered.astype(F32), x.astype(F32))
    parts = exact(x).reshape(128, 4, 16)
    if dtype == F32:
        assert_ulps(total, parts.sum(axis=1), F32, ulps=2, what="SBUF +=")
    else:
        # A bf16 SBUF accumulator rounds after every addition, in iteration order.
        want = np.zeros((128, 16))
        for j in range(4):
            want = exact(rounded(want + parts[:, j], BF16))
        assert_ulps(total, want, BF16, ulps=0, what="bf16 SBUF +=")


@nki.jit
def reshape_kernel(x):
    """An HBM tensor viewed with another shape: [512, 8] -> [128, 32] row-major."""
    flat = x.reshape((128, 32))
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(flat))
    out_view = out.reshape((512, 8))
    nl.store(out_view[0:4, :], value=nl.load(x[0:4, :]) * 2)  # a write through a view changes the tensor
    return out


def test_hbm_reshape():
    x = rand((512, 8), F32, seed=10)
    got = reshape_kernel(x)
    want = x.reshape(128, 32).copy()
    want[0, :] = (x[0:4, :] * 2).reshape(-1)
    np.testing.assert_array_equal(got, want)
