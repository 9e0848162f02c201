"""The legacy-API features working together, as a flash-attention forward in the style of AWS's reference
kernels: a frozen ``FlashConfig`` argument, a dtype argument, a ``@nki.jit(mode='trace')`` sub-kernel on SBUF
tiles, ``nl.finfo(...).min`` as the masking value, ``lazy_initialization=`` and ``nl.static_cast``; against a
float64 NumPy formula."""

import math
from dataclasses import dataclass

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.language.support import BF16, exact, rand


@dataclass(frozen=True)
class FlashConfig:
    seq_tile_size: int = 128
    causal: bool = True
    sliding_window: int = 0  # > 0: a query sees only the keys less than this many positions before it


@nki.jit(mode="trace")
def _scaled_scores(q_tile, k_tile, scale):
    """``scale * q_tile.T @ k_tile``: [T query, T key] scores of one block, fp32 in SBUF."""
    return nl.multiply(nisa.nc_matmul(q_tile, k_tile), scale)


@nki.jit
def flash_fwd(q, k, v, config=FlashConfig(), softmax_scale=None, acc_dtype=nl.float32):
    """Single-head attention with an online softmax: ``q``, ``k`` are [d, S], ``v`` is [S, d]; returns [S, d]."""
    d, seqlen = q.shape
    tile = config.seq_tile_size
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    neg = nl.finfo(acc_dtype).min
    out = nl.ndarray((seqlen, d), dtype=q.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(seqlen // tile):
        q_tile = nl.load(q[:, nl.ds(i * tile, tile)])
        row_max = nl.full((tile, 1), neg, dtype=acc_dtype, lazy_initialization=True)
        row_sum = nl.zeros((tile, 1), dtype=acc_dtype, lazy_initialization=True)
        acc = nl.zeros((tile, d), dtype=acc_dtype, lazy_initialization=True)
        for j in nl.sequential_range(seqlen // tile):
            scores = _scaled_scores(q_tile, nl.load(k[:, nl.ds(j * tile, tile)]), scale)
            if config.causal:
                i_q, i_k = nl.mgrid[0:tile, 0:tile]
                scores = nisa.affine_select(i * tile + i_q >= j * tile + i_k, scores, neg)
            if config.sliding_window:
                i_q, i_k = nl.mgrid[0:tile, 0:tile]
                # Key tiles wholly before the window give a row max of `neg` and exp(0) weights; the first tile
                # with a real score scales them by alpha = exp(neg - max) = 0, as in AWS's kernels.
                scores = nisa.affine_select(j * tile + i_k + config.sliding_window > i * tile + i_q, scores, neg)
            new_max = nl.maximum(row_max, nl.max(scores, axis=1, keepdims=True))
            p = nl.exp(nl.subtract(scores, new_max))
            alpha = nl.exp(nl.subtract(row_max, new_max))
            row_sum[...] = nl.add(nl.multiply(row_sum, alpha), nl.sum(p, axis=1, keepdims=True))
            pv = nl.matmul(nl.static_cast(p, v.dtype), nl.load(v[nl.ds(j * tile, tile), :]))
            acc[...] = nl.add(nl.multiply(acc, alpha), pv)
            row_max[...] = new_max
        nl.store(out[nl.ds(i * tile, tile), :], value=nl.static_cast(nl.divide(acc, row_sum), q.dtype))
    return out


def _attention(q, k, v, scale, causal, window=0):
    s = scale * (exact(q).T @ exact(k))
    behind = np.arange(s.shape[0])[:, None] - np.arange(s.shape[1])[None, :]  # query position - key position
    if causal:
        s = np.where(behind >= 0, s, -np.inf)
    if window:
        s = np.where(behind < window, s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ exact(v)


@pytest.mark.parametrize(
    "config",
    [FlashConfig(), FlashConfig(seq_tile_size=64, causal=False), FlashConfig(seq_tile_size=64, sliding_window=96)],
    ids=["causal-128", "full-64", "causal-sliding-window-96"],
)
def test_flash_fwd_with_a_config_argument(config):
    d, seqlen = 64, 256
    q, k = rand((d, seqlen), BF16, seed=41), rand((d, seqlen), BF16, seed=42)
    v = rand((seqlen, d), BF16, seed=43)
    traced = []
    hook = lambda kernel, target: traced.append(kernel)
    TRACE_HOOKS.append(hook)
    try:
        got = flash_fwd(q, k, v, config)
    finally:
        TRACE_HOOKS.remove(hook)
    assert got.dtype == BF16
    assert [p.name for p in traced[0].params] == ["q", "k", "v"]  # config, scale and dtype are constants
    # Error budget: p is rounded to bf16 (2^-9 relative each) before the PV matmul, so the weighted mean of v is
    # off by at most 2^-9 * max|v|; the output is rounded to bf16 once more (2^-9 relative, 2^-8 to be safe).
    want = _attention(q, k, v, 1 / math.sqrt(d), config.causal, config.sliding_window)
    np.testing.assert_allclose(exact(got), want, rtol=2**-8, atol=2**-9 * np.abs(exact(v)).max())


def test_flash_fwd_on_the_simulator_matches_the_reference():
    d, seqlen = 64, 256
    q, k, v = rand((d, seqlen), BF16, seed=44), rand((d, seqlen), BF16, seed=45), rand((seqlen, d), BF16, seed=46)
    out, profile = nki.simulate(flash_fwd, q, k, v, FlashConfig(), target="trn2")
    np.testing.assert_array_equal(out, flash_fwd(q, k, v, FlashConfig()))
    assert profile.latency_ns > 0
