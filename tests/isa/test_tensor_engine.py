"""nisa.nc_matmul and nisa.nc_transpose."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import BF16, F16, F32, assert_close, f32, rand


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
def test_nc_matmul_is_stationary_transposed_times_moving_in_fp32(dtype):
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(nl.load(s), nl.load(m))
        assert res.buffer == "psum" and res.dtype == np.float32
        nl.store(out, res)
        return out

    s, m = rand((128, 64), dtype, seed=1), rand((128, 256), dtype, seed=2)
    expected = f32(s).astype(np.float64).T @ f32(m).astype(np.float64)
    assert_close(kernel(s, m), expected, F32, rtol=1e-5, atol=1e-5)


def test_nc_matmul_accumulates_in_psum_over_an_affine_loop():
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(s.shape[0] // 128):
            st = nl.load(s[nl.ds(k * 128, 128), :])
            mv = nl.load(m[nl.ds(k * 128, 128), :])
            acc += nisa.nc_matmul(st, mv, is_moving_onezero=False, tile_position=(0, 0), tile_size=(128, 128))
        nl.store(out, acc)
        return out

    s, m = rand((512, 128), BF16, seed=3), rand((512, 64), BF16, seed=4)
    expected = f32(s).astype(np.float64).T @ f32(m).astype(np.float64)
    assert_close(kernel(s, m), expected, F32, rtol=1e-5, atol=1e-5)


def test_nc_matmul_with_a_mask_computes_only_the_selected_rows():
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        i_m = nl.arange(64)[:, None]
        res = nisa.nc_matmul(nl.load(s), nl.load(m), mask=(i_m < 40))
        nl.store(out[0:40, :], res[0:40, :])
        return out

    s, m = rand((128, 64), seed=5), rand((128, 32), seed=6)
    got = kernel(s, m)
    np.testing.assert_allclose(got[:40], (s.T @ m)[:40], rtol=1e-5, atol=1e-5)


@backend_independent
def test_nc_matmul_records_its_flags():
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s), nl.load(m), is_stationary_onezero=True, is_transpose=True))
        return out

    text = str(nki.trace(kernel, rand((128, 64)), rand((128, 32))))
    assert "is_stationary_onezero = true" in text and "is_transpose = true" in text


@pytest.mark.parametrize(
    "engine, shape, buffer",
    [
        (nisa.tensor_engine, (128, 96), "psum"),
        (nisa.vector_engine, (32, 16), "sbuf"),
        (nisa.unknown_engine, (128, 64), "psum"),
        (nisa.unknown_engine, (32, 32), "sbuf"),
    ],
)
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_nc_transpose_on_each_engine(engine, shape, buffer, dtype):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.shared_hbm)
        res = nisa.nc_transpose(nl.load(a), engine=engine)
        assert res.buffer == buffer
        nl.store(out, res)
        return out

    a = rand(shape, dtype, seed=7)
    assert_close(kernel(a), f32(a).T, dtype, rtol=0, atol=0)
    chosen = "tensor" if buffer == "psum" else "vector"
    assert f'engine = "{chosen}"' in str(nki.trace(kernel, a))


def test_nc_transpose_dtype_and_mask():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        init = nl.zeros((a.shape[1], a.shape[0]), dtype=nl.bfloat16)
        i_r = nl.arange(a.shape[1])[:, None]
        res = nisa.nc_transpose(nl.load(a), dtype=nl.bfloat16, mask=(i_r < 20))
        init[0:20, :] = nl.copy(res[0:20, :])
        nl.store(out, init)
        return out

    a = rand((64, 48), seed=8)
    got = kernel(a)
    assert_close(got[:20], a.T[:20], BF16, rtol=0, atol=0)
    assert not f32(got[20:]).any()


@backend_independent
def test_nc_transpose_rejects_an_engine_it_cannot_use():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_transpose(nl.load(a), engine=nisa.gpsimd_engine))
        return out

    with pytest.raises(nki.NkiApiError, match=r"engine=gpsimd is not supported.*tensor, vector"):
        kernel(rand((32, 32)))


@backend_independent
def test_nc_transpose_on_the_vector_engine_is_limited_to_32x32():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_transpose(nl.load(a), engine=nisa.vector_engine))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.nc_transpose.*\[32, 64\].*32x32.*Tensor engine"):
        kernel(rand((32, 64)))


def _nc_matmul_of(dt_s, dt_m):
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s, dtype=dt_s), nl.load(m, dtype=dt_m)))
        return out

    return kernel


@pytest.mark.parametrize("dt_s, dt_m, wide, narrow", [
    (nl.float32, nl.bfloat16, "'stationary' is float32", "'moving' is bfloat16"),
    (nl.float16, nl.float32, "'moving' is float32", "'stationary' is float16"),
])  # fmt: skip
@backend_independent
def test_nc_matmul_multiplies_fp32_only_with_fp32(dt_s, dt_m, wide, narrow):
    """§2.7 nc_matmul: input dtypes may mix, "except fp32/tf32 only with fp32/tf32" (in both API generations)."""
    s, m = rand((128, 64), F32, seed=1), rand((128, 256), F32, seed=2)
    with pytest.raises(nki.NkiApiError, match=rf"test_tensor_engine.py:\d+: nisa.nc_matmul: operand {wide} but "
                                              rf"operand {narrow}; the Tensor engine multiplies fp32/tf32 only"):
        _nc_matmul_of(dt_s, dt_m)(s, m)


def test_nc_matmul_mixes_narrow_dtypes():
    s, m = rand((128, 64), F32, seed=1), rand((128, 256), F32, seed=2)
    for dt_s, dt_m in [(nl.bfloat16, nl.float16), (nl.float8_e4m3, nl.bfloat16)]:
        got = _nc_matmul_of(dt_s, dt_m)(s, m)
        want = f32(s.astype(dt_s)).astype(np.float64).T @ f32(m.astype(dt_m)).astype(np.float64)
        assert_close(got, want, F32, rtol=1e-5, atol=1e-5)
