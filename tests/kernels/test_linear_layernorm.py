"""The encoder's library kernels (linear with its epilogues, the fused MLP, layernorm) against float64 NumPy, and
the matmul's modelled speed against the Tensor engine's bound.

Tolerances: fp32 1e-5 (fp32 products and sums); bf16: inputs already bf16, fp32 accumulation, one rounding of
the bf16 output (2^-9 relative) after bias / GELU / residual (each rounded once more where it is a separate
instruction writing bf16): 2^-6 relative of outputs of O(1-10), i.e. rtol 2e-2 and atol 4e-2.
"""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.layernorm import layernorm, layernorm_reference
from kernels.linear import gelu_tanh, linear, linear_reference, mlp, plan_layernorm_linear, plan_linear, plan_mlp
from tests.backend_fixture import backend_independent, slow_on_jax

DT = {"float32": np.float32, "bfloat16": nl.bfloat16}
TOL = {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 4e-2)}


def _close(out, ref, dtype):
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(ref, np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("epilogue", ["none", "bias", "gelu", "residual"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_epilogues(epilogue, dtype):
    # 300 rows (2 full tiles and a ragged one), K 320 (a ragged K tile), N 640 (a ragged 128-column block)
    rng = np.random.default_rng(0)
    dt = DT[dtype]
    x = rng.standard_normal((300, 320)).astype(dt)
    w = (rng.standard_normal((320, 640)) / 18).astype(dt)
    b, r = rng.standard_normal(640).astype(dt), rng.standard_normal((300, 640)).astype(dt)
    out = linear(x, w, None if epilogue == "none" else b, r if epilogue == "residual" else None, epilogue)
    _close(out, linear_reference(x, w, b, r, epilogue), dtype)


@pytest.mark.slow  # 3-8 s each on the JAX backend
@pytest.mark.parametrize("x_source, epilogue", [("dma", "residual"), ("rows", "residual"), ("rows", "none")])
def test_linear_after_the_prologue_stores_whole_rows(x_source, epilogue):
    # 700 rows: 3 prologue tiles, then 3 more through the row-tile paths (one store, and one residual load, per
    # row tile of N = 640 columns: a full and a ragged 512-column block; on the rows path the two whole tiles share
    # them, the ragged last tile alone), K 192 (a ragged K tile)
    rng = np.random.default_rng(5)
    dt = DT["bfloat16"]
    x, w = rng.standard_normal((700, 192)).astype(dt), (rng.standard_normal((192, 640)) / 14).astype(dt)
    b, r = rng.standard_normal(640).astype(dt), rng.standard_normal((700, 640)).astype(dt)
    kernel, args, consts = plan_linear(x, w, None if epilogue == "none" else b, r if epilogue == "residual" else None,
                                       epilogue)  # fmt: skip
    out = kernel(*args, **dict(consts, x_source=x_source))
    _close(out, linear_reference(x, w, b, r, epilogue), "bfloat16")


@slow_on_jax
def test_mlp_matches_fc1_gelu_fc2():
    dtype = "bfloat16"
    rng = np.random.default_rng(1)
    dt = DT[dtype]
    m, k, h = 600, 256, 1024  # one full token block of 512 and a ragged one of 88
    x, r = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((m, k)).astype(dt)
    w1, w2 = (rng.standard_normal((k, h)) / 16).astype(dt), (rng.standard_normal((h, k)) / 32).astype(dt)
    b1, b2 = rng.standard_normal(h).astype(dt), rng.standard_normal(k).astype(dt)
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    expected = f(r) + gelu_tanh(f(x) @ f(w1) + f(b1)) @ f(w2) + f(b2)
    _close(mlp(x, w1, b1, w2, b2, r), expected, dtype)


@backend_independent
def test_mlp_refuses_fp32():
    a = np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError, match="2-byte dtypes only"):
        plan_mlp(a, np.zeros((8, 16), np.float32), np.zeros(16, np.float32), np.zeros((16, 8), np.float32),
                 np.zeros(8, np.float32), a)  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layernorm(dtype):
    rng = np.random.default_rng(2)
    dt = DT[dtype]
    x = (3 * rng.standard_normal((300, 768)) + 1).astype(dt)
    g, b = (1 + rng.standard_normal(768) / 10).astype(dt), rng.standard_normal(768).astype(dt)
    # bf16: the normalised value is rounded to bf16 before gamma and beta (each rounded once more): 2^-7 of ~3
    rtol, atol = (1e-5, 1e-5) if dtype == "float32" else (2e-2, 6e-2)
    np.testing.assert_allclose(np.asarray(layernorm(x, g, b), np.float64), layernorm_reference(x, g, b).astype(
        np.float64), rtol=rtol, atol=atol)  # fmt: skip


@backend_independent
def test_linear_refuses_bad_shapes():
    with pytest.raises(ValueError, match="x \\(M, K\\) and w \\(K, N\\)"):
        plan_linear(nki.spec((4, 8), "bfloat16"), nki.spec((9, 4), "bfloat16"))
    with pytest.raises(ValueError, match="needs a bias"):
        plan_linear(nki.spec((4, 8), "bfloat16"), nki.spec((8, 4), "bfloat16"), epilogue="gelu")


@backend_independent
def test_linear_refuses_a_weight_too_wide_for_sbuf_up_front():
    """K and N within the launcher's limits (8192 each) whose resident weight does not fit SBUF beside the row
    tiles (no width family's box holds them): refused by the launcher naming the limit, not by the verifier's
    sbuf-capacity rule deep in the trace."""
    with pytest.raises(ValueError, match=r"linear: K 8192 and N 8192 in float32 with epilogue 'none' do not fit "
                                         r"SBUF: .*224 KiB \(reference/nki.md §1.1;"):
        plan_linear(nki.spec((256, 8192), "float32"), nki.spec((8192, 8192), "float32"))
    g = nki.spec((8192,), "float32")
    with pytest.raises(ValueError, match=r"layernorm_linear: K 8192 and N 8192 in float32 with epilogue 'bias'"):
        plan_layernorm_linear(nki.spec((256, 8192), "float32"), g, g, nki.spec((8192, 8192), "float32"), g)
    plan_linear(nki.spec((256, 8192), "float32"), nki.spec((8192, 512), "float32"))  # the widest that fits


def _tensor_bound_ns(prof):
    """The Tensor-engine bound of a profile: its matmul FLOPs at the target's dense BF16 peak (§3.1)."""
    return prof.tensor_flops / prof.target.tensor_peak_flops_per_ns


@pytest.mark.parametrize("m, k, n", [(4096, 768, 3072), (4096, 3072, 768)])
@backend_independent
def test_matmul_is_within_1_3x_of_the_tensor_engine_bound(m, k, n):
    # The eager matmul (linear without an epilogue) at large shapes, modelled on trn2 from shapes alone.
    kernel, args, consts = plan_linear(nki.spec((m, k), "bfloat16"), nki.spec((k, n), "bfloat16"))
    prof = nki.benchmark(kernel, *args, target="trn2", **consts)
    assert prof.tensor_flops == pytest.approx(2 * m * k * n)
    assert prof.latency_ns <= 1.3 * _tensor_bound_ns(prof), prof.latency_ns / _tensor_bound_ns(prof)


# (linear's 42 shape families take ~22 s of CPU to trace and prove, benchmarks/family_load.py; tests/hub/
# test_library_families.py publishes some)
@pytest.mark.parametrize("package", ["layernorm", pytest.param("linear", marks=pytest.mark.slow)])
@backend_independent
def test_packages_bundle(package):
    # each declared specialisation traces, verifies and round-trips; the small fp32 ones carry test vectors that
    # the builder checked against the NumPy reference
    from pathlib import Path

    from hub_client.bundle import build_bundle

    bundle = build_bundle(Path(__file__).parents[2] / "kernels" / package, benchmarks=False)
    assert any(f.startswith("tests/") for f in bundle.files)
    assert any(f.startswith("ir/") for f in bundle.files)


def _norm_inputs(rng, m, k, dt):
    x = (3 * rng.standard_normal((m, k)) + 1).astype(dt)
    return x, (1 + rng.standard_normal(k) / 10).astype(dt), rng.standard_normal(k).astype(dt)


# bf16 tolerance of the fused LayerNorm: the normalised rows are rounded to bf16 once, then scaled and shifted by
# gamma and beta in the copy that evicts their transpose (one more rounding) before the matmul; products and sums
# in fp32, the output rounded once more: as the unfused layernorm + linear, 2e-2 relative / 4e-2 absolute.
@pytest.mark.parametrize("m, k, n, epilogue", [
    (300, 320, 640, "gelu"),  # ragged row tile, a ragged K tile (gamma/beta loaded per K tile), ragged N block
    (200, 256, 192, "bias"),  # K a multiple of 128: gamma/beta in one load, transposed on the Tensor engine
    (2565, 128, 128, "none"),  # 21 row tiles: the prologue, one affine group of 16 and a static rest of 2
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@slow_on_jax
def test_layernorm_linear(m, k, n, epilogue, dtype):
    from kernels.linear import layernorm_linear, layernorm_linear_reference

    rng = np.random.default_rng(3)
    dt = DT[dtype]
    x, g, be = _norm_inputs(rng, m, k, dt)
    w, b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dt), rng.standard_normal(n).astype(dt)
    bias = None if epilogue == "none" else b
    out = layernorm_linear(x, g, be, w, bias, 1e-6, epilogue)
    _close(out, layernorm_linear_reference(x.astype(np.float64), g, be, w, b, 1e-6, epilogue), dtype)


@pytest.mark.parametrize("m, k, h", [
    (100, 192, 384),  # one ragged token block, a ragged K tile
    (600, 256, 1024),  # a full block of 512 and a ragged one: the one-block-ahead pipeline and the residual ring
    (2100, 128, 256),  # five blocks: one affine group of four, then the static rest
])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@slow_on_jax
def test_layernorm_mlp(m, k, h, dtype):
    from kernels.linear import layernorm_mlp, layernorm_mlp_reference

    rng = np.random.default_rng(4)
    dt = DT[dtype]
    x, g, be = _norm_inputs(rng, m, k, dt)
    w1 = (rng.standard_normal((k, h)) / np.sqrt(k)).astype(dt)
    w2 = (rng.standard_normal((h, k)) / np.sqrt(h)).astype(dt)
    b1, b2 = rng.standard_normal(h).astype(dt), rng.standard_normal(k).astype(dt)
    out = layernorm_mlp(x, g, be, w1, b1, w2, b2)
    # bf16 residual stream of O(10): 2^-8 relative of the sum is ~4e-2 absolute at the largest outputs
    ref = layernorm_mlp_reference(x.astype(np.float64), g, be, w1, b1, w2, b2)
    if dtype == "float32":
        _close(out, ref, dtype)
    else:
        np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=2e-2, atol=8e-2)


@backend_independent
def test_layernorm_fusions_refuse_bad_shapes():
    from kernels.linear import plan_layernorm_linear, plan_layernorm_mlp

    s = lambda *shape: nki.spec(shape, "bfloat16")  # noqa: E731
    with pytest.raises(ValueError, match="gamma and beta must be \\(8,\\)"):
        plan_layernorm_linear(s(4, 8), s(9), s(8), s(8, 4), s(4))
    with pytest.raises(ValueError, match="no residual epilogue"):
        plan_layernorm_linear(s(4, 8), s(8), s(8), s(8, 4), s(4), epilogue="residual")
    with pytest.raises(ValueError, match="the residual is x"):
        plan_layernorm_mlp(s(4, 8), s(8), s(8), s(8, 16), s(16), s(16, 4), s(4))


@pytest.mark.parametrize("m, k, hd, dtype", [
    (300, 256, 256, "float32"),  # a full token block of 512 is not reached: one ragged block of 300
    (600, 192, 128, "bfloat16"),  # two blocks (the one-ahead pipeline), a ragged K tile
    (130, 128, 384, "float32"),  # three q and three k feature tiles, V in one 384-column block
])  # fmt: skip
@slow_on_jax
def test_layernorm_qkv_split_layout(m, k, hd, dtype):
    from kernels.linear import layernorm_qkv, layernorm_qkv_reference, plan_layernorm_qkv

    rng = np.random.default_rng(9)
    dt = DT[dtype]
    x, g, be = _norm_inputs(rng, m, k, dt)
    w, b = (rng.standard_normal((k, 3 * hd)) / np.sqrt(k)).astype(dt), rng.standard_normal(3 * hd).astype(dt)
    qkT, v = layernorm_qkv(x, g, be, w, b, num_heads=2)
    ref_qkT, ref_v = layernorm_qkv_reference(x.astype(np.float64), g, be, w, b, num_heads=2)
    assert qkT.shape == (2 * hd, m) and v.shape == (m, hd)
    _close(qkT, ref_qkT, dtype)
    _close(v, ref_v, dtype)
    with pytest.raises(ValueError, match="multiple of 128"):
        plan_layernorm_qkv(x, g, be, w[:, :3 * 64], b[:3 * 64], num_heads=1)


@pytest.mark.parametrize("k, n", [(768, 2304), (768, 768), (768, 3072), (3072, 768)])
@backend_independent
def test_matmul_at_one_image_is_within_2x_of_its_bound(k, n):
    # ViT-B/16's matmuls at batch 1 (197 tokens: every row tile in the streamed prologue, bound by the weight's
    # DMA): within 2x of the larger of the Tensor-engine bound and the DMA bound (its HBM bytes at the memory
    # roof), plus one load's and one store's fixed cost (a launch cannot hide its first load's and last store's,
    # reference/nki.md §3.4). One 512-column block per transfer (before the weight runs and row stores) was 2.1-3.5x.
    kernel, args, consts = plan_linear(nki.spec((197, k), "bfloat16"), nki.spec((k, n), "bfloat16"))
    prof = nki.benchmark(kernel, *args, target="trn2", **consts)
    bound = max(_tensor_bound_ns(prof), prof.hbm_bytes / prof.memory_bytes_per_ns) + 2 * prof.target.dma_fixed_ns
    assert prof.latency_ns <= 2.0 * bound, prof.latency_ns / bound
