"""The eager baseline set: every op against NumPy, the attention's six launches against the fused kernel's float64
formula, and each op family's modelled speed against its own bound (the DMA bound, the bound of the runs its
layout allows, or the Tensor engine's: tests/kernels/test_linear_layernorm.py for the matmul)."""

import numpy as np
import pytest

import nki_dsl as nki
from kernels.eager import compose
from kernels.eager.attention_ops import (
    bmm_pv_kernel,
    bmm_qk_kernel,
    embed_tokens_kernel,
    merge_heads_kernel,
    split_heads_kernel,
)
from kernels.eager.elementwise import add_kernel, bias_add_kernel, gelu_kernel, scale_kernel
from kernels.eager.softmax import softmax_kernel
from kernels.eager.vit import eager_attention_steps
from kernels.linear import gelu_tanh
from kernels.vit_attn import attention_qkv_reference
from tests.backend_fixture import backend_independent, slow_on_jax

F32 = np.float32


def test_elementwise_ops():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1000, 768)).astype(F32), rng.standard_normal((1000, 768)).astype(F32)
    b = rng.standard_normal(768).astype(F32)
    np.testing.assert_array_equal(bias_add_kernel(x, b), x + b)
    np.testing.assert_array_equal(add_kernel(x, y), x + y)
    np.testing.assert_array_equal(scale_kernel(x, scale=0.125), x * F32(0.125))
    np.testing.assert_allclose(gelu_kernel(x), gelu_tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_elementwise_ragged_rows():
    # 131 rows: no divisor gives 4 KiB per partition, so one row per partition, the last tile masked
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((131, 40)).astype(F32), rng.standard_normal((131, 40)).astype(F32)
    np.testing.assert_array_equal(add_kernel(x, y), x + y)


def test_softmax_rows():
    x = (5 * np.random.default_rng(2).standard_normal((300, 197))).astype(F32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(softmax_kernel(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@slow_on_jax
def test_eager_attention_composition():
    batch, seq, heads, d = 2, 197, 3, 64
    qkv = np.random.default_rng(3).standard_normal((batch, seq, 3 * heads * d)).astype(F32)
    out = compose.run(eager_attention_steps(batch, seq, heads, d), {"qkv": qkv})["attn"]
    expected = attention_qkv_reference(qkv, heads).reshape(batch * seq, heads * d)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_embed_tokens():
    rng = np.random.default_rng(4)
    patches, cls, pos = rng.standard_normal((2 * 16, 8)), rng.standard_normal(8), rng.standard_normal((17, 8))
    patches, cls, pos = patches.astype(F32), cls.astype(F32), pos.astype(F32)
    tokens = np.concatenate([np.broadcast_to(cls, (2, 1, 8)), patches.reshape(2, 16, 8)], axis=1) + pos
    np.testing.assert_array_equal(embed_tokens_kernel(patches, cls, pos), tokens.reshape(34, 8))


@pytest.mark.parametrize("name, kernel, shapes", [
    ("add", add_kernel, [(8192, 1024), (8192, 1024)]),
    ("bias add", bias_add_kernel, [(8192, 1024), (1024,)]),
    ("gelu", gelu_kernel, [(8192, 3072)]),
])  # fmt: skip
@backend_independent
def test_elementwise_is_within_1_3x_of_the_dma_bound(name, kernel, shapes):
    # The DMA bound: the bytes moved to and from HBM at the memory roof of the target (the DMA engines'
    # aggregate peak or the core's share of HBM bandwidth, whichever is lower, reference/nki.md §3.4).
    prof = nki.benchmark(kernel, *[nki.spec(s, "bfloat16") for s in shapes], target="trn2")
    bound_ns = prof.hbm_bytes / prof.memory_bytes_per_ns
    assert prof.hbm_bytes >= 2 * 8192 * shapes[0][1] * 2  # at least the input read and the output written
    assert prof.latency_ns <= 1.3 * bound_ns, prof.latency_ns / bound_ns


# -- every eager op family against its own bound: the baseline must not be silently slow ---------------------------
def _layout_bound_ns(prof, sides):
    """The time the DMA engines need at least for ``sides`` ((bytes, contiguous run in bytes) per HBM side of the
    op's traffic: the runs its layout allows, e.g. head_dim * 2 bytes for a head's row in (B, H, S, D)), each run a
    descriptor whose fixed cost is streaming 256 B (reference/nki.md §3.4's payload curve), at the memory roof;
    plus one load and one store fixed cost (a launch's first load and last store cannot hide theirs)."""
    t = prof.target
    dma = sum(b * (run + t.dma_overhead_bound_bytes) / run for b, run in sides) / prof.memory_bytes_per_ns
    return max(dma, prof.tensor_ideal_ns) + 2 * t.dma_fixed_ns


def _attention_cases():
    # ViT-B/16 at batch 8 and DINOv2-L/14 at batch 1 (bf16: 2 bytes per element)
    for b, s, h, d in ((8, 197, 12, 64), (1, 1370, 16, 64)):
        qkv, hd, sc = b * s * 3 * h * d * 2, b * h * s * d * 2, b * h * s * s * 2
        yield f"split heads {b}x{s}", split_heads_kernel, [(b, s, 3 * h * d)], {"num_heads": h}, [
            (qkv, 3 * h * d * 2), (qkv, d * 2)]
        yield f"merge heads {b}x{s}", merge_heads_kernel, [(b, h, s, d)], {}, [(hd, d * 2), (hd, h * d * 2)]
        yield f"q @ k^T {b}x{s}", bmm_qk_kernel, [(b, h, s, d)] * 2, {}, [(2 * hd, d * 2), (sc, s * 2)]
        yield f"attn @ v {b}x{s}", bmm_pv_kernel, [(b, h, s, s), (b, h, s, d)], {}, [(sc, s * 2), (2 * hd, d * 2)]
        yield f"softmax {b}x{s}", softmax_kernel, [(b * h * s, s)], {}, [(2 * sc, 4096)]  # rows packed to 4 KiB


@pytest.mark.parametrize("name, kernel, shapes, consts, sides", list(_attention_cases()),
                         ids=[c[0] for c in _attention_cases()])  # fmt: skip
@backend_independent
def test_attention_ops_are_within_1_8x_of_their_layout_bound(name, kernel, shapes, consts, sides):
    # Each op moves several heads (or rows) per transfer, so its transfers' fixed costs hide behind their streaming
    # and it runs near what the DMA engines need for its bytes in the runs its layout allows. One head per transfer
    # (the baseline before this test) was 6-12x over this bound.
    prof = nki.benchmark(kernel, *[nki.spec(s, "bfloat16") for s in shapes], target="trn2", **consts)
    assert prof.hbm_bytes == sum(b for b, _ in sides)
    bound = _layout_bound_ns(prof, sides)
    assert prof.latency_ns <= 1.8 * bound, prof.latency_ns / bound


@pytest.mark.parametrize("shape", [(2364, 64), (1576, 768)])  # scale q at ViT-B/16 batch 1; an encoder row tile
@backend_independent
def test_elementwise_at_encoder_shapes_is_within_1_5x_of_its_bound(shape):
    # 2,364 rows have no divisor giving 4 KiB per partition: 12 rows per partition (1.5 KiB), not one (128 B)
    prof = nki.benchmark(scale_kernel, nki.spec(shape, "bfloat16"), target="trn2", scale=0.125)
    n = 2 * shape[0] * shape[1]
    bound = _layout_bound_ns(prof, [(n, 4096), (n, 4096)])
    assert prof.latency_ns <= 1.5 * bound, prof.latency_ns / bound
