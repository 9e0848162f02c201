"""The eager baseline set: every op against NumPy, the attention's six launches against the fused kernel's float64
formula, and the elementwise ops' modelled speed against the DMA bound."""

import numpy as np
import pytest

import nki_dsl as nki
from kernels.eager import compose
from kernels.eager.attention_ops import embed_tokens_kernel
from kernels.eager.elementwise import add_kernel, bias_add_kernel, gelu_kernel, scale_kernel
from kernels.eager.softmax import softmax_kernel
from kernels.eager.vit import eager_attention_steps
from kernels.linear import gelu_tanh
from kernels.vit_attn import attention_qkv_reference

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
def test_elementwise_is_within_1_3x_of_the_dma_bound(name, kernel, shapes):
    # The DMA bound: the bytes moved to and from HBM at the memory roof of the target (the DMA engines'
    # aggregate peak or the core's share of HBM bandwidth, whichever is lower, reference/nki.md §3.4).
    prof = nki.benchmark(kernel, *[nki.spec(s, "bfloat16") for s in shapes], target="trn2")
    bound_ns = prof.hbm_bytes / prof.memory_bytes_per_ns
    assert prof.hbm_bytes >= 2 * 8192 * shapes[0][1] * 2  # at least the input read and the output written
    assert prof.latency_ns <= 1.3 * bound_ns, prof.latency_ns / bound_ns
