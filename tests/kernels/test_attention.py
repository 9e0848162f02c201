"""Fused self-attention (Stable Diffusion tutorial) and flash attention with an online softmax, against
``softmax(scale * q k^T) v`` computed in float64.

Tolerances. fp32 (``mixed_precision=False``): every product and sum is fp32, and the online softmax's rescaling
is exact up to rounding: 1e-5. Mixed precision: q, k, v and the probabilities feed the Tensor engine as bf16
(2^-9 relative each); scores of size O(3) move by ~1e-2 before exp, so outputs (averages of O(1) values of v)
are within ~1e-2: atol 3e-2.
"""

import numpy as np
import pytest

from tests.kernels import formulas as ref
from tests.kernels.nki_style import attention

FP32_TOL = (1e-5, 1e-5)
MIXED_TOL = (3e-2, 3e-2)


def _qkv(shape, dtype=ref.F32, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(ref.randn(rng, shape, dtype) for _ in range(3))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mixed", [False, True])
def test_fused_self_attention(causal, mixed):
    q, k, v = _qkv((384, 64), seed=int(causal))
    out = attention.fused_self_attn_for_SD_small_head_size(q, k, v, use_causal_mask=causal, mixed_precision=mixed)
    ref.assert_close(out, ref.attention(q, k, v, 0.125, causal), *(MIXED_TOL if mixed else FP32_TOL))


def test_fused_self_attention_bf16_io():
    # bf16 in and out: one more rounding of the result (2^-9 relative of values <~ 2).
    q, k, v = _qkv((256, 32), ref.LOW_PRECISION["bf16"], seed=5)
    out = attention.fused_self_attn_for_SD_small_head_size(q, k, v, softmax_scale=32**-0.5)
    assert out.dtype == q.dtype
    ref.assert_close(out, ref.attention(q, k, v, 32**-0.5, False), *MIXED_TOL)


def _flash_expected(q, k, v, scale, causal):
    b, h = q.shape[:2]
    return np.stack([np.stack([ref.attention(q[i, j].T, k[i, j].T, v[i, j], scale, causal) for j in range(h)])
                     for i in range(b)])  # fmt: skip


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mixed", [False, True])
def test_flash_fwd_spmd_grid(causal, mixed):
    # Grid [batch=2, heads=2]; 2 query tiles; 2 K/V blocks of 512, so the running max/sum are rescaled once.
    b, h, d, sq, sk = 2, 2, 64, 256, 1024
    rng = np.random.default_rng(int(causal) + 2 * int(mixed))
    q, k = ref.randn(rng, (b, h, d, sq)), ref.randn(rng, (b, h, d, sk))
    v = ref.randn(rng, (b, h, sk, d))
    out = attention.flash_fwd[b, h](q, k, v, use_causal_mask=causal, mixed_precision=mixed)
    ref.assert_close(out, _flash_expected(q, k, v, d**-0.5, causal), *(MIXED_TOL if mixed else FP32_TOL))


def test_flash_fwd_small_blocks_large_logits():
    # Eight K/V blocks of 128 and logits of O(50): without the exp(m_old - m_new) rescaling the sums overflow
    # or the early blocks dominate; d = 128 fills the partitions of the first matmul.
    b, h, d, sq, sk = 1, 1, 128, 128, 1024
    rng = np.random.default_rng(9)
    q, k = ref.randn(rng, (b, h, d, sq), scale=2.0), ref.randn(rng, (b, h, d, sk), scale=2.0)
    v = ref.randn(rng, (b, h, sk, d))
    out = attention.flash_fwd[b, h](q, k, v, softmax_scale=0.5, use_causal_mask=False, mixed_precision=False,
                                    k_block=128)  # fmt: skip
    ref.assert_close(out, _flash_expected(q, k, v, 0.5, False), 1e-4, 1e-4)
