"""The composed ViT forward (patch embedding, blocks, final layernorm), eager and with the library's kernels,
against a float64 NumPy ViT forward with the same random weights; and the launch lists' structure.

Config: 2 blocks of width 128 with 2 heads of 64, 64x64 images (16 patches + the class token), batch 1: small
enough for the NumPy reference backend, with every kernel on its real code paths (ragged tiles included).

Tolerance (bf16): every launch rounds its output to bf16 (2^-9 relative) and inputs and weights are bf16; some
20 roundings on the residual stream of O(1) values give errors of ~1e-2 (seen: 3e-2 at worst, 6e-3 relative
in norm); we allow 8e-2 per element and 2e-2 relative in norm. fp32: 1e-5.
"""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.eager.compose import breakdown, profile, run
from kernels.eager.vit import VIT_B16, ViTConfig, encoder_steps, reference_forward, weight_shapes, weights
from tests.backend_fixture import backend_independent, slow_on_jax

SMALL = ViTConfig("test", dim=128, depth=2, heads=2, image=64)


@pytest.mark.parametrize("mode", ["eager", "fused"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@slow_on_jax
def test_forward_matches_numpy(mode, dtype):
    dt = np.float32 if dtype == "float32" else nl.bfloat16
    w = weights(SMALL, dt)
    patches = np.random.default_rng(1).standard_normal((SMALL.patches, SMALL.patch_dim)).astype(dt)
    out = run(encoder_steps(SMALL, 1, mode), dict(w, patches=patches))["out"].astype(np.float64)
    ref = reference_forward(SMALL, w, patches)
    assert out.shape == (SMALL.seq, SMALL.dim)
    if dtype == "float32":
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    else:
        assert np.abs(out - ref).max() <= 8e-2
        assert np.linalg.norm(out - ref) / np.linalg.norm(ref) <= 2e-2


@backend_independent
def test_vit_b16_launch_lists():
    eager, fused = encoder_steps(VIT_B16, 8, "eager"), encoder_steps(VIT_B16, 8, "fused")
    # eager: patch matmul + bias, embed, 12 x 19 launches, final layernorm; fused: linear, embed, 12 x 4
    # (layernorm + qkv, attention, proj + residual, layernorm + mlp), final layernorm
    assert len(eager) == 2 + 1 + 12 * 19 + 1 and len(fused) == 1 + 1 + 12 * 4 + 1
    assert sum(s.op == "softmax" for s in eager) == 12 and not any(s.op == "softmax" for s in fused)
    assert sum(s.op == "layernorm" for s in eager) == 25 and sum(s.op == "layernorm" for s in fused) == 1


@backend_independent
def test_breakdown_sums_to_the_total():
    values = {k: nki.spec(s, "bfloat16") for k, s in weight_shapes(SMALL).items()}
    values["patches"] = nki.spec((SMALL.patches, SMALL.patch_dim), "bfloat16")
    prof = profile(encoder_steps(SMALL, 1, "fused"), values, "trn2")
    assert sum(breakdown(prof).values()) == pytest.approx(sum(p.latency_us for _, p in prof))
