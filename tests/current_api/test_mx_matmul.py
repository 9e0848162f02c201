"""MXFP matmul on trn3 in the current API (reference/nki.md §2.7 nc_matmul_mx, quantize_mx, "dtypes"): packed
fp8/fp4 data with e8m0 scales, contracted over a K loop into PSUM, checked against a float64 NumPy formula written
from the documented semantics (not from nki_dsl.ir.mx) on the NumPy reference, the JAX backend and the simulator;
quantize_mx of bf16 data, then the MX matmul, against the same formula applied to a float64 quantisation."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiError, NkiVerificationError

TARGET = "NEURON_PLATFORM_TARGET_OVERRIDE"
FORMATS = {  # name -> (bits per value, ml_dtypes type, NumPy storage of one packed element)
    "float8_e4m3fn_x4": (8, ml_dtypes.float8_e4m3fn, np.uint32),
    "float8_e5m2_x4": (8, ml_dtypes.float8_e5m2, np.uint32),
    "float4_e2m1fn_x4": (4, ml_dtypes.float4_e2m1fn, np.uint16),
}


@pytest.fixture(autouse=True)
def _trn3(monkeypatch):
    monkeypatch.setenv(TARGET, "trn3")


@nki.jit
def mx_matmul(a, a_scale, b, b_scale):
    """a [KT, P, M] and b [KT, P, N] packed (K = KT * 4P), scales [KT, P, M] / [KT, P, N]; returns a.T @ b [M, N]."""
    KT, P, M = a.shape
    N = b.shape[2]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(KT):
        st = nl.ndarray((P, M), a.dtype, buffer=nl.sbuf)
        mv = nl.ndarray((P, N), b.dtype, buffer=nl.sbuf)
        st_s = nl.ndarray(a_scale.shape[1:], a_scale.dtype, buffer=nl.sbuf)
        mv_s = nl.ndarray(b_scale.shape[1:], b_scale.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a[k])
        nisa.dma_copy(dst=mv, src=b[k])
        nisa.dma_copy(dst=st_s, src=a_scale[k])
        nisa.dma_copy(dst=mv_s, src=b_scale[k])
        nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=st_s, moving_scale=mv_s)
    res = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def _codes(rng, fmt, shape):
    """Random bit patterns of one value of ``fmt``, NaN patterns excluded."""
    bits, np_type, _ = FORMATS[fmt]
    codes = rng.integers(0, 1 << bits, shape).astype(np.uint8)
    finite = np.isfinite(codes.view(np_type).astype(np.float32))
    return np.where(finite, codes, 0).astype(np.uint8)


def _pack(codes, fmt):
    """codes [K, F] (contraction first) -> [K // 4, F] packed elements: value j of element (p, f) is code
    [4p + j, f], in byte (nibble) j counted from the lowest."""
    bits, _, storage = FORMATS[fmt]
    k, f = codes.shape
    lanes = codes.reshape(k // 4, 4, f).astype(np.uint64)
    return sum(lanes[:, j] << (bits * j) for j in range(4)).astype(storage).view(nl.__dict__[fmt])


def _scale_tile(exps, partitions, unused=0xFF):
    """Group exponents [P // 8, F] laid out as nc_matmul_mx reads them: P <= 32 -> [P // 8, F]; else [P, F] with
    the 4 groups of each 32-partition quadrant in its first 4 rows, the other rows NaN (0xFF), never read."""
    if partitions <= 32:
        return exps.astype(np.uint8)
    tile = np.full((partitions, exps.shape[1]), unused, np.uint8)
    for g in range(partitions // 8):
        tile[32 * (g // 4) + g % 4] = exps[g]
    return tile


def _operand(rng, fmt, kt, p, f):
    """Packed data [KT, P, F], its scale tiles and the float64 values x scale [KT * 4P, F] they stand for."""
    _, np_type, _ = FORMATS[fmt]
    codes = _codes(rng, fmt, (kt, 4 * p, f))
    exps = rng.integers(127 - 6, 127 + 6, (kt, p // 8, f))
    packed = np.stack([_pack(c, fmt) for c in codes])
    scales = np.stack([_scale_tile(e, p) for e in exps])
    values = codes.view(np_type).astype(np.float64)  # [KT, 4P, F]
    factor = np.exp2(exps.astype(np.float64) - 127).repeat(32, axis=1)  # a group is 8 partitions x 4 = 32 rows of K
    return packed, scales, (values * factor).reshape(kt * 4 * p, f)


def _close(out, expected):
    """fp32 accumulation of up to 1024 products: relative 1e-5 of the result's scale (sums that cancel lose the
    rest to rounding)."""
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("fa, fb", [("float8_e4m3fn_x4", "float8_e4m3fn_x4"), ("float8_e5m2_x4", "float8_e4m3fn_x4"),
                                    ("float4_e2m1fn_x4", "float4_e2m1fn_x4")])  # fmt: skip
@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_mx_matmul_matches_the_float64_formula(fa, fb, backend):
    rng = np.random.default_rng(7)
    kt, p, m, n = 2, 128, 128, 512
    a, sa, av = _operand(rng, fa, kt, p, m)
    b, sb, bv = _operand(rng, fb, kt, p, n)
    expected = av.T @ bv
    if backend == "simulator":
        out = nki.simulate(mx_matmul)(a, sa, b, sb)
    else:
        out = mx_matmul(a, sa, b, sb, backend=backend)
    _close(out, expected)


def test_small_tiles_take_quarter_height_scales():
    # P = 32: the scale tile is [P // 8, F] = [4, F]
    rng = np.random.default_rng(3)
    a, sa, av = _operand(rng, "float8_e4m3fn_x4", 1, 32, 64)
    b, sb, bv = _operand(rng, "float8_e4m3fn_x4", 1, 32, 128)
    assert sa.shape == (1, 4, 64)
    _close(mx_matmul(a, sa, b, sb), av.T @ bv)


def test_e8m0_scales_in_sbuf_read_as_their_values():
    @nki.jit
    def with_e8m0(a, a_scale, b, b_scale):
        P, M = a.shape
        out = nl.ndarray((M, b.shape[1]), nl.float32, buffer=nl.shared_hbm)
        st, mv = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf), nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
        st_s = nl.ndarray(a_scale.shape, nl.float8_e8m0fnu, buffer=nl.sbuf)
        mv_s = nl.ndarray(b_scale.shape, nl.float8_e8m0fnu, buffer=nl.sbuf)
        for dst, src in ((st, a), (mv, b), (st_s, a_scale), (mv_s, b_scale)):
            nisa.dma_copy(dst=dst, src=src)
        acc = nl.ndarray(out.shape, nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=st_s, moving_scale=mv_s)
        res = nl.ndarray(out.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    rng = np.random.default_rng(5)
    a, sa, av = _operand(rng, "float8_e4m3fn_x4", 1, 64, 32)
    b, sb, bv = _operand(rng, "float8_e4m3fn_x4", 1, 64, 64)
    as_e8m0 = lambda s: s[0].view(ml_dtypes.float8_e8m0fnu)  # noqa: E731 - the same bytes, typed as e8m0
    _close(with_e8m0(a[0], as_e8m0(sa), b[0], as_e8m0(sb)), av.T @ bv)


# -- quantize_mx ---------------------------------------------------------------------------------------------------

@nki.jit
def quantized_matmul(a_src, b_src):
    """a_src [P, 4M] and b_src [P, 4N] bf16, contraction index 4p + j at column 4f + j; quantised to e4m3fn x4."""
    P, M4 = a_src.shape
    N4 = b_src.shape[1]
    out = nl.ndarray((M4 // 4, N4 // 4), nl.float32, buffer=nl.shared_hbm)
    tiles = []
    for src in (a_src, b_src):
        t = nl.ndarray(src.shape, src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=src)
        q = nl.ndarray((P, src.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((P, src.shape[1] // 4), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=t, dst_scale=s)
        tiles.append((q, s))
    acc = nl.ndarray(out.shape, nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=tiles[0][0], moving=tiles[1][0], stationary_scale=tiles[0][1],
                      moving_scale=tiles[1][1])
    res = nl.ndarray(out.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def _quantized64(x):
    """The documented quantize_mx on float64: per 8 partitions x 4 values X = 2^(floor(log2 max|v|) - 7) (Emax 8
    for e4m3fn), values v / X rounded to e4m3fn; returns the dequantised values [P, F] (x X again)."""
    p, f = x.shape
    g = x.reshape(p // 8, 8, f // 4, 4)
    amax = np.abs(g).max(axis=(1, 3), keepdims=True)
    scale = np.where(amax > 0, np.exp2(np.floor(np.log2(np.where(amax > 0, amax, 1))) - 7), 2.0**-127)
    q = (g / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return (q * scale).reshape(p, f)


def _contraction_major(x):
    """[P, 4F] with column 4f + j = contraction index 4p + j -> the [4P, F] matrix."""
    p, f4 = x.shape
    return x.reshape(p, f4 // 4, 4).transpose(0, 2, 1).reshape(4 * p, f4 // 4)


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_quantize_mx_then_mx_matmul(backend):
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((128, 4 * 64)) * np.exp2(rng.integers(-3, 4, (128, 1)))).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, 4 * 256)).astype(ml_dtypes.bfloat16)
    a[:8, :4] = 0  # a zero group: scale 2^-127, values 0
    expected = _contraction_major(_quantized64(a.astype(np.float64))).T @ \
        _contraction_major(_quantized64(b.astype(np.float64)))
    out = nki.simulate(quantized_matmul)(a, b) if backend == "simulator" else quantized_matmul(a, b, backend=backend)
    _close(out, expected)
    exact = _contraction_major(a.astype(np.float64)).T @ _contraction_major(b.astype(np.float64))
    assert np.abs(out - exact).max() < 0.1 * np.abs(exact).max()  # fp8 quantisation error, not garbage


# -- errors --------------------------------------------------------------------------------------------------------

def test_mx_instructions_are_trn3_only(monkeypatch):
    monkeypatch.setenv(TARGET, "trn2")
    rng = np.random.default_rng(0)
    a, sa, _ = _operand(rng, "float8_e4m3fn_x4", 1, 32, 32)
    with pytest.raises(NkiError, match=r"nisa.nc_matmul_mx runs on NeuronCore-v4 \(trn3\) only"):
        mx_matmul(a, sa, a, sa)


def test_a_misplaced_scale_tile_is_refused():
    rng = np.random.default_rng(0)
    a, sa, _ = _operand(rng, "float8_e4m3fn_x4", 1, 64, 32)
    with pytest.raises(NkiError, match=r"'stationary_scale' \[8, 32\] must be \[64, 32\]"):
        mx_matmul(a, sa[:, :8], a, sa)


def test_packed_tiles_cannot_be_computed_on():
    @nki.jit
    def add_packed(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    a, _, _ = _operand(np.random.default_rng(0), "float8_e4m3fn_x4", 1, 32, 8)
    with pytest.raises(NkiError, match="packed MX dtype float8_e4m3fn_x4, which holds 4 values per element"):
        add_packed(a[0])


def test_a_packed_tile_copied_into_a_tile_of_another_dtype_is_refused_naming_both():
    @nki.jit
    def copy_packed(a):
        out = nl.ndarray(a.shape, nl.uint32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, nl.uint32, buffer=nl.sbuf)  # same bytes per element, but not the same dtype
        nisa.tensor_copy(dst=u, src=t)
        nisa.dma_copy(dst=out, src=u)
        return out

    a, _, _ = _operand(np.random.default_rng(0), "float8_e4m3fn_x4", 1, 32, 8)
    with pytest.raises(NkiVerificationError) as e:
        copy_packed(a[0])
    (diag,) = e.value.diagnostics
    assert (diag.rule, diag.op) == ("dtype", "nisa.tensor_copy")
    assert diag.message == ("nisa.tensor_copy copies between float8_e4m3fn_x4 and uint32; a packed MX dtype "
                            "(float8_e4m3fn_x4) is copied only to and from tiles of the same dtype (its elements "
                            "are raw bits)")  # fmt: skip


def test_packed_dtypes_count_packed_elements():
    assert nl.float8_e4m3fn_x4.itemsize == 4 and nl.float8_e5m2_x4.itemsize == 4
    assert nl.float4_e2m1fn_x4.itemsize == 2 and np.dtype(nl.float8_e8m0fnu).itemsize == 1
    a, _, _ = _operand(np.random.default_rng(0), "float4_e2m1fn_x4", 1, 32, 8)
    assert a.shape == (1, 32, 8) and a.dtype == nl.float4_e2m1fn_x4  # 128 x 8 fp4 values in 32 x 8 elements

    @nki.jit
    def copy(a):
        assert a.dtype == nl.float4_e2m1fn_x4 and a.shape == (32, 8)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(copy(a[0]), a[0].view(np.uint16))  # bits moved exactly (outputs: raw storage)


# -- the NC-v4 moving free size ------------------------------------------------------------------------------------

@nki.jit
def wide_matmul(s, m):
    out = nl.ndarray((s.shape[1], m.shape[1]), nl.float32, buffer=nl.shared_hbm)
    st, mv = nl.ndarray(s.shape, s.dtype, buffer=nl.sbuf), nl.ndarray(m.shape, m.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=s)
    nisa.dma_copy(dst=mv, src=m)
    acc = nl.ndarray(out.shape, nl.float32, buffer=nl.psum)  # N fp32 per partition: N / 512 PSUM banks
    nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
    res = nl.ndarray(out.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_trn3_matmuls_take_a_moving_tile_of_4096(backend):
    # §1.2 "Matmul detail": NC-v4 moving free "can go up to 4096 for float32 dst ... the entire PSUM"
    rng = np.random.default_rng(0)
    s, m = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 4096)).astype(np.float32)
    out = nki.simulate(wide_matmul)(s, m) if backend == "simulator" else wide_matmul(s, m)
    _close(out, s.astype(np.float64).T @ m)


def test_wider_moving_tiles_are_refused_on_trn3_and_wide_ones_on_trn2(monkeypatch):
    rng = np.random.default_rng(0)
    s = rng.standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(NkiError, match=r"moving tile \[128, 8192\] exceeds the moving free-size limit of 4096"):
        wide_matmul(s, rng.standard_normal((128, 8192)).astype(np.float32))
    monkeypatch.setenv(TARGET, "trn2")
    with pytest.raises(NkiError, match=r"moving tile \[128, 1024\] exceeds the moving free-size limit of 512"):
        wide_matmul(s, rng.standard_normal((128, 1024)).astype(np.float32))


def test_an_mx_matmul_takes_the_tensor_time_of_a_bf16_one_for_4x_the_flops():
    # §3.1: "8x128 (MXFP8 dense)" input elements per cycle against 2x128 for BF16: [128 x4, 128] x [128 x4, 512]
    # (K = 512) streams in the cycles of a BF16 [128, 128] x [128, 512] (K = 128)
    rng = np.random.default_rng(0)
    a, sa, _ = _operand(rng, "float8_e4m3fn_x4", 1, 128, 128)
    b, sb, _ = _operand(rng, "float8_e4m3fn_x4", 1, 128, 512)
    _, mx = nki.simulate(mx_matmul, a[None, 0], sa[None, 0], b[None, 0], sb[None, 0])
    s, m = np.zeros((128, 128), ml_dtypes.bfloat16), np.zeros((128, 512), ml_dtypes.bfloat16)
    _, bf16 = nki.simulate(wide_matmul, s, m)
    tensor_ns = [p.latency_ns * p.engine_busy["tensor"] for p in (mx, bf16)]
    assert tensor_ns[0] == pytest.approx(tensor_ns[1], rel=1e-9)
    assert mx.tensor_flops == pytest.approx(4 * bf16.tensor_flops)
