"""``nisa.nc_matmul_mx`` and ``nisa.quantize_mx`` through the instruction-returning front end (reference/nki.md
§2.7; NC-v4): values against float64 formulas of the documented semantics, on each backend (conftest), and the
shape rules' messages. The current-API conformance kernels are in tests/current_api/test_mx_matmul.py."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiError
from tests.backend_fixture import backend_independent

E4M3 = ml_dtypes.float8_e4m3fn
X4 = np.dtype([("float8_e4m3fn_x4", np.uint32)])  # what nl.float8_e4m3fn_x4 is in the current API


def _packed(codes):
    """codes [4P, F] uint8 (contraction first) -> [P, F] packed e4m3fn x4: value j in byte j of element (p, f)."""
    k, f = codes.shape
    return np.ascontiguousarray(codes.reshape(k // 4, 4, f).transpose(0, 2, 1)).view("<u4")[..., 0].view(X4)


@nki.jit
def mx_kernel(a, sa, b, sb):
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.nc_matmul_mx(nl.load(a), nl.load(b), nl.load(sa), nl.load(sb)))
    return out


def _case(seed, p, m, n):
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, 0x7F, (4 * p, f)).astype(np.uint8) for f in (m, n)]  # positive finite e4m3fn
    exps = [rng.integers(120, 134, (p // 8, f)) for f in (m, n)]
    scales = []
    for e in exps:
        tile = np.full((p, e.shape[1]), 0xFF, np.uint8)  # rows the layout leaves unused: NaN, never read
        for g in range(p // 8):
            tile[32 * (g // 4) + g % 4] = e[g]
        scales.append(tile)
    values = [c.view(E4M3).astype(np.float64) * np.exp2(e - 127.0).repeat(32, axis=0) for c, e in zip(codes, exps)]
    return _packed(codes[0]), scales[0], _packed(codes[1]), scales[1], values[0].T @ values[1]


def test_nc_matmul_mx_contracts_packed_values_with_their_scales():
    a, sa, b, sb, expected = _case(1, 64, 32, 128)
    out = mx_kernel(a, sa, b, sb, target="trn3")
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def test_quantize_mx_scales_each_group_by_a_power_of_two():
    @nki.jit
    def quantize(x):
        scale = nl.ndarray((x.shape[0] // 8, x.shape[1] // 4), dtype=nl.uint8, buffer=nl.sbuf)  # P <= 32
        q = nisa.quantize_mx(nl.load(x), scale)
        out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
        out_scale = nl.ndarray(scale.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        nl.store(out, q)
        nl.store(out_scale, scale)
        return out, out_scale

    x = np.random.default_rng(2).standard_normal((32, 8)).astype(ml_dtypes.bfloat16)
    q, s = quantize(x, target="trn3")
    groups = x.astype(np.float64).reshape(4, 8, 2, 4)  # [group of 8 partitions, 8, packed column, 4]
    e = np.floor(np.log2(np.abs(groups).max(axis=(1, 3)))) - 7  # Emax 8 for e4m3fn: X = 2^(floor(log2 amax) - 7)
    np.testing.assert_array_equal(s, (e + 127).astype(np.uint8))  # P = 32: scale tile [P // 8, F // 4]
    codes = q.view(np.uint8).reshape(32, 2, 4)  # byte j of element (p, f) = value 4f + j of partition p
    want = (groups / np.exp2(e)[:, None, :, None]).reshape(32, 2, 4).astype(E4M3).view(np.uint8)
    np.testing.assert_array_equal(codes, want)


@pytest.mark.parametrize(("shape_a", "shape_sa", "message"), [
    ((48, 16), (48, 16), r"has 48 partitions; MX tiles span a multiple of 32"),
    ((32, 15), (4, 15), r"must have an even free size"),
    ((64, 16), (8, 16), r"'stationary_scale' \[8, 16\] must be \[64, 16\]"),
])  # fmt: skip
@backend_independent
def test_mx_shape_rules(shape_a, shape_sa, message):
    @nki.jit
    def kernel(a, sa, b, sb):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul_mx(nl.load(a), nl.load(b), nl.load(sa), nl.load(sb)))
        return out

    p = shape_a[0]
    a, sa = np.zeros(shape_a, X4), np.zeros(shape_sa, np.uint8)
    b, sb = np.zeros((p, 8), X4), np.zeros((p if p > 32 else p // 8, 8), np.uint8)
    with pytest.raises(NkiError, match=message):
        kernel(a, sa, b, sb, target="trn3")


@backend_independent
def test_mx_kernel_verifies_and_runs_the_same_after_a_round_trip():
    from nki_dsl.backends.numpy_ref import compile_kernel
    from nki_dsl.ir.parser import parse_kernel
    from nki_dsl.ir.printer import print_kernel
    from nki_dsl.passes.verifier import verify_kernel

    @nki.jit
    def both(x, b, sb):
        scale = nl.ndarray((x.shape[0], x.shape[1] // 4), dtype="float8_e8m0fnu", buffer=nl.sbuf)
        q = nisa.quantize_mx(nl.load(x), scale, dtype="float8_e5m2_x4")
        out = nl.ndarray((q.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul_mx(q, nl.load(b), scale, nl.load(sb)))
        return out

    trn3 = nki.get_target("trn3")
    _, _, b, sb, _ = _case(4, 64, 8, 16)
    x = np.random.default_rng(4).standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    traced = nki.trace(both, x, b, sb, target="trn3").ir
    assert {"nisa.quantize_mx", "nisa.nc_matmul_mx"} <= {op.name for op in traced.body}
    text = print_kernel(traced)
    assert "f8e5m2x4[64, 8]" in text and "f8e8m0[64, 8]" in text
    parsed = parse_kernel(text)
    assert verify_kernel(traced, trn3) == [] and verify_kernel(parsed, trn3) == []
    got = both(x, b, sb, target="trn3", backend="numpy")
    np.testing.assert_array_equal(compile_kernel(parsed).run({"x": x, "b": b.view(np.uint32), "sb": sb}), got)
    assert np.isfinite(got).all()


def test_mx_matmul_tiles_rows_only():
    @nki.jit
    def tiled(a, sa, b, sb, size, position):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul_mx(nl.load(a), nl.load(b), nl.load(sa), nl.load(sb), tile_size=size,
                                        tile_position=position))
        return out

    a, sa, b, sb, expected = _case(6, 64, 32, 64)
    out = tiled(a, sa, b, sb, (64, 128), (64, 0), target="trn3")  # the lower half of the rows
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
    with pytest.raises(NkiError, match="the MX matmul tiles rows only"):
        tiled(a, sa, b, sb, (64, 64), (0, 64), target="trn3")
