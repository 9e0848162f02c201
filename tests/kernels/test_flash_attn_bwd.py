"""The legacy-API flash-attention backward (tests/kernels/legacy/flash_bwd.py, in the style of AWS's
``flash_attn_bwd``) against a float64 NumPy formula for dq, dk and dv: GQA (4 query heads on 2 KV heads), causal and
full, fp32 and bf16 Tensor-engine operands, on every backend (the kernel_backend fixture) and on the simulator."""

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.kernels.legacy.flash_bwd import FlashConfig, flash_attn_bwd

BS, HEADS, KV_HEADS, D, SEQ = 1, 4, 2, 32, 512
GROUP = HEADS // KV_HEADS
SCALE = 1 / np.sqrt(D)


def _scores(q, k, causal):
    s = SCALE * np.einsum("bhdq,bhdk->bhqk", q, np.repeat(k, GROUP, axis=1))
    return np.where(np.tril(np.ones((SEQ, SEQ), bool)), s, -np.inf) if causal else s


def _forward(q, k, v, causal):
    """o and the log-sum-exp of each query row, float64: the kernel's inputs besides q, k, v, dy."""
    s = _scores(q, k, causal)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    return np.einsum("bhqk,bhdk->bhdq", np.exp(s - lse), np.repeat(v, GROUP, axis=1)), lse[..., 0]


def _backward(q, k, v, o, dy, lse, causal):
    """dq, dk, dv in float64 from the same (rounded) inputs the kernel gets; dk, dv summed over each KV group."""
    p = np.exp(_scores(q, k, causal) - lse[..., None])
    d_row = (dy * o).sum(axis=2)  # D = rowsum(dO * O), [b, h, q]
    ds = p * (np.einsum("bhdq,bhdk->bhqk", dy, np.repeat(v, GROUP, axis=1)) - d_row[..., None])
    dq = SCALE * np.einsum("bhqk,bhdk->bhdq", ds, np.repeat(k, GROUP, axis=1))
    dk = SCALE * np.einsum("bhqk,bhdq->bhdk", ds, q)
    dv = np.einsum("bhqk,bhdq->bhdk", p, dy)

    def per_kv_head(x):
        return x.reshape(BS, KV_HEADS, GROUP, D, SEQ).sum(axis=2)

    return dq, per_kv_head(dk), per_kv_head(dv)


def _case(causal, seed=0):
    rng = np.random.default_rng(seed)
    q, dy = (rng.standard_normal((BS, HEADS, D, SEQ)) for _ in range(2))
    k, v = (rng.standard_normal((BS, KV_HEADS, D, SEQ)) for _ in range(2))
    o, lse = _forward(q, k, v, causal)
    lse_tiles = lse.reshape(BS, HEADS, SEQ // 128, 128).transpose(0, 1, 3, 2)  # AWS's [b, h, 128, seq // 128]
    args = [a.astype(np.float32) for a in (q, k, v, o, dy, lse_tiles)]
    lse32 = args[5].transpose(0, 1, 3, 2).reshape(BS, HEADS, SEQ)
    want = _backward(*(a.astype(np.float64) for a in args[:5]), lse32.astype(np.float64), causal)
    return args, want


CONFIGS = {  # key tiles of 256 keys: two key tiles, four query tiles, two transposed dS blocks per pair
    "causal-fp32": FlashConfig(k_tile_size=256, causal=True, mixed_precision=False),
    "full-fp32": FlashConfig(k_tile_size=256, causal=False, mixed_precision=False),
    "causal-bf16": FlashConfig(k_tile_size=256, causal=True, mixed_precision=True),
}
# Relative to each gradient's largest entry. fp32: sums of at most SEQ * GROUP fp32 products (a few ulps of 2^-24
# each, measured below 1e-6). bf16: P, dS and the operands rounded to bf16 (2^-9 relative each) before three
# chained matmuls; measured below 1e-2.
TOLERANCE = {"fp32": 1e-5, "bf16": 3e-2}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gradients_match_the_float64_formula(name):
    args, want = _case(CONFIGS[name].causal)
    got = flash_attn_bwd[BS, KV_HEADS](*args, CONFIGS[name])
    for label, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == np.float32, label
        np.testing.assert_allclose(g, w, rtol=0, atol=TOLERANCE[name.split("-")[1]] * np.abs(w).max(), err_msg=label)


def test_the_simulator_gives_the_reference_numbers_and_a_timing():
    args, _ = _case(True, seed=1)
    config = CONFIGS["causal-bf16"]
    out, profile = nki.simulate(flash_attn_bwd[BS, KV_HEADS], *args, config, target="trn2")
    for got, want in zip(out, flash_attn_bwd[BS, KV_HEADS](*args, config, backend="numpy"), strict=True):
        np.testing.assert_array_equal(got, want)
    assert profile.latency_ns > 0


def test_the_trace_mode_helper_is_inlined_and_the_config_is_a_constant():
    args, _ = _case(True, seed=2)
    traced = []
    hook = lambda kernel, target: traced.append(kernel)  # noqa: E731
    TRACE_HOOKS.append(hook)
    try:
        fresh = nki.jit(flash_attn_bwd.fn)  # empty trace cache: the hook sees every kernel traced
        nki.trace(fresh[BS, KV_HEADS], *args, FlashConfig(k_tile_size=256))
    finally:
        TRACE_HOOKS.remove(hook)
    assert [k.name for k in traced] == ["flash_attn_bwd"]  # no kernel of its own for _flash_attn_bwd_core
    assert [p.name for p in traced[0].params] == ["q", "k", "v", "o", "dy", "lse"]
