"""``nisa.nc_matmul(..., perf_mode=nisa.matmul_perf_mode.double_row)``: the trn2 FP8 double-row matmul, whose
operands are ``stationary [K, 2, M]`` and ``moving [K, 2, N]`` and whose contraction runs over K x 2 rows
(reference/nki.md §1.2, §2.7 nc_matmul, §3.1). Values against a float64 einsum of the exact fp8 inputs."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import F32, assert_close, rand

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def _double_row(s, m):
    """float64 formula: out[m, n] = sum over k, r of s[k, r, m] * m[k, r, n]."""
    return np.einsum("krm,krn->mn", s.astype(np.float64), m.astype(np.float64))


@nki.jit
def double_row_kernel(s, m, perf_mode):
    """``s`` [K, 2, M], ``m`` [K, 2, N]; K a multiple of 128, accumulated in PSUM over an affine loop."""
    out = nl.ndarray((s.shape[2], m.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((s.shape[2], m.shape[2]), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(s.shape[0] // 128):
        st = nl.load(s[nl.ds(k * 128, 128), :, :])
        mv = nl.load(m[nl.ds(k * 128, 128), :, :])
        acc += nisa.nc_matmul(st, mv, perf_mode=perf_mode)
    nl.store(out, acc)
    return out


CASES = [(E4M3, E4M3, 128, 128, 512), (E5M2, E5M2, 256, 64, 256), (E4M3, E5M2, 128, 128, 96)]


@pytest.mark.parametrize(("st_dtype", "mv_dtype", "k", "m", "n"), CASES, ids=["e4m3", "e5m2-k256", "mixed"])
def test_double_row_contracts_over_partitions_and_rows(st_dtype, mv_dtype, k, m, n):
    s, mv = rand((k, 2, m), st_dtype, -4, 4, seed=31), rand((k, 2, n), mv_dtype, -4, 4, seed=32)
    got = double_row_kernel(s, mv, nisa.matmul_perf_mode.double_row)
    # Each fp8 product is exact in fp32; the fp32 sum of K*2 of them is within a few fp32 ulps of the exact sum.
    assert_close(got, _double_row(s, mv), F32, rtol=1e-5, atol=1e-4)


def test_double_row_by_name_and_in_the_ir():
    s, mv = rand((128, 2, 128), E4M3, seed=33), rand((128, 2, 64), E4M3, seed=34)
    np.testing.assert_array_equal(
        double_row_kernel(s, mv, "double_row"), double_row_kernel(s, mv, nisa.matmul_perf_mode.double_row)
    )
    text = nki.trace(double_row_kernel, s, mv, "double_row").text
    assert 'perf_mode = "double_row"' in text
    assert nki.parse_ir(text).text == text


def test_perf_mode_none_is_the_ordinary_matmul():
    @nki.jit
    def kernel(s, m):
        out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(s), nl.load(m), perf_mode=nisa.matmul_perf_mode.none))
        return out

    s, m = rand((128, 64), E4M3, seed=35), rand((128, 32), E4M3, seed=36)
    assert_close(kernel(s, m), s.astype(np.float64).T @ m.astype(np.float64), F32, rtol=1e-5, atol=1e-5)


def test_double_row_on_the_simulator_computes_the_same_values():
    s, mv = rand((128, 2, 128), E4M3, seed=37), rand((128, 2, 256), E4M3, seed=38)
    out, profile = nki.simulate(double_row_kernel, s, mv, "double_row", target="trn2")
    np.testing.assert_array_equal(out, double_row_kernel(s, mv, "double_row"))
    assert profile.latency_ns > 0


@nki.jit
def one_double_row(s, m, tile_size):
    out = nl.ndarray((s.shape[-1], m.shape[-1]), dtype=nl.float32, buffer=nl.shared_hbm)
    size = tile_size or ()
    pos = (0, 0) if tile_size else ()
    nl.store(out, nisa.nc_matmul(nl.load(s), nl.load(m), perf_mode="double_row", tile_size=size, tile_position=pos))
    return out


@pytest.mark.parametrize(
    ("s", "m", "tile_size", "error", "message"),
    [
        (((128, 2, 64), ml_dtypes.bfloat16), ((128, 2, 64), E4M3), None, nki.NkiApiError,
         r"perf_mode=double_row multiplies fp8 tiles .*operand 'stationary' is bfloat16"),
        (((128, 64), E4M3), ((128, 64), E4M3), None, nki.NkiTraceError,
         r"perf_mode=double_row takes 'stationary' \[K, 2, M\] and 'moving' \[K, 2, N\].*got \[128, 64\]"),
        (((128, 4, 64), E4M3), ((128, 4, 64), E4M3), None, nki.NkiTraceError,
         r"perf_mode=double_row takes .* got \[128, 4, 64\]"),
        (((128, 2, 64), E4M3), ((64, 2, 64), E4M3), None, nki.NkiTraceError, r"contraction \(partition\) sizes differ"),
        (((128, 2, 64), E4M3), ((128, 2, 64), E4M3), (128, 64), nki.NkiTraceError,
         r"perf_mode=double_row cannot be combined with column tiling \(tile_size \[128, 64\]\)"),
        (((128, 2, 256), E4M3), ((128, 2, 64), E4M3), None, nki.NkiVerificationError,
         r"result %3 f32\[256, 64\] in 'psum' has 256 partitions, exceeding the partition limit of 128"),
        (((128, 2, 64), E4M3), ((128, 2, 1024), E4M3), None, nki.NkiVerificationError,
         r"PSUM tensor %3 f32\[64, 1024\] .*a PSUM tile must fit one 2048-byte bank"),
    ],
    ids=["bf16", "2-d", "4-rows", "k-differs", "column-tiling", "m-too-big", "n-too-big"],
)  # fmt: skip
@backend_independent
def test_double_row_misuse_is_reported(s, m, tile_size, error, message):
    (s_shape, s_dtype), (m_shape, m_dtype) = s, m
    with pytest.raises(error, match=rf"test_double_row_matmul.py:\d+: nisa.nc_matmul: {message}"):
        one_double_row(np.zeros(s_shape, s_dtype), np.zeros(m_shape, m_dtype), tile_size)


@backend_independent
def test_an_unknown_perf_mode_is_refused():
    with pytest.raises(nki.NkiApiError, match=r"perf_mode='fast' is not one of MatmulPerfMode \(none, double_row\)"):
        double_row_kernel(np.zeros((128, 2, 8), E4M3), np.zeros((128, 2, 8), E4M3), "fast")


@backend_independent
def test_3d_operands_without_double_row_say_what_they_need():
    with pytest.raises(nki.NkiTraceError, match=r"must be 2-D tiles \(\[K, 2, N\] operands need perf_mode=double_row"):
        double_row_kernel(np.zeros((128, 2, 8), E4M3), np.zeros((128, 2, 8), E4M3), "none")
