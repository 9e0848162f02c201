"""The legacy-API features working together, as a flash-attention forward in the style of AWS's reference
kernels: a frozen ``FlashConfig`` argument, a dtype argument, a ``@nki.jit(mode='trace')`` sub-kernel on SBUF
tiles, ``nl.finfo(...).min`` as the masking value, ``lazy_initialization=`` and ``nl.static_cast``, causal and
sliding-window masks, attention sinks and dropout seeded as AWS's ``flash_fwd`` seeds it; against a float64 NumPy
formula.

Dropout: each (query tile, key tile) pair seeds the generator with ``seed + i * n_tiles + j`` (``nl.add`` of the
loaded seed and a loop-index expression, ``nl.random_seed``) and ``nl.dropout`` keeps an element where its uniform
draw is ``>= p`` (the NumPy reference's ``RandomState``: ``default_rng(seed).random(shape, float32)``), so
``_dropout_mask`` reproduces the mask exactly. Sinks: a logit in every row's softmax denominator, entered as the
online softmax's starting max (and a starting sum of exp(sink - sink) = 1)."""

import math
from dataclasses import dataclass

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
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
def flash_fwd(q, k, v, seed, sinks=None, softmax_scale=None, dropout_p=0.0, config=FlashConfig(),
              acc_dtype=nl.float32):  # fmt: skip
    """Single-head attention with an online softmax: ``q``, ``k`` are [d, S], ``v`` is [S, d]; returns [S, d].
    ``seed`` is a [1] int32 tensor (read when ``dropout_p > 0``), ``sinks`` a [1] logit or None."""
    d, seqlen = q.shape
    tile = config.seq_tile_size
    n_tiles = seqlen // tile
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    neg = nl.finfo(acc_dtype).min
    out = nl.ndarray((seqlen, d), dtype=q.dtype, buffer=nl.shared_hbm)
    if dropout_p > 0.0:  # as AWS's flash_fwd reads its seed and rate
        seed_local = nl.load(seed[0])
        dropout_p_tensor = nl.full((tile, 1), dropout_p, dtype=nl.float32)
    if sinks is not None:
        sink = nl.broadcast_to(nl.load(sinks[0], dtype=acc_dtype), shape=(tile, 1))
    for i in nl.affine_range(n_tiles):
        q_tile = nl.load(q[:, nl.ds(i * tile, tile)])
        if sinks is not None:  # the sink's logit starts each row: max = sink, sum = exp(sink - sink)
            row_max = nl.ndarray((tile, 1), dtype=acc_dtype, buffer=nl.sbuf)
            row_max[...] = nl.copy(sink)
            row_sum = nl.full((tile, 1), 1.0, dtype=acc_dtype)
        else:
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
            if dropout_p > 0.0:  # the denominator keeps every weight; the values see the dropped, rescaled ones
                nl.random_seed(seed=nl.add(seed_local, i * n_tiles + j))
                i_p = nl.arange(tile)[:, None]
                p = nl.multiply(nl.dropout(p, rate=dropout_p_tensor[i_p, 0]), 1 / (1 - dropout_p))
            pv = nl.matmul(nl.static_cast(p, v.dtype), nl.load(v[nl.ds(j * tile, tile), :]))
            acc[...] = nl.add(nl.multiply(acc, alpha), pv)
            row_max[...] = new_max
        nl.store(out[nl.ds(i * tile, tile), :], value=nl.static_cast(nl.divide(acc, row_sum), q.dtype))
    return out


def _attention(q, k, v, scale, causal, window=0, sink=None, keep=None, dropout_p=0.0):
    s = scale * (exact(q).T @ exact(k))
    behind = np.arange(s.shape[0])[:, None] - np.arange(s.shape[1])[None, :]  # query position - key position
    if causal:
        s = np.where(behind >= 0, s, -np.inf)
    if window:
        s = np.where(behind < window, s, -np.inf)
    m = s.max(axis=1, keepdims=True) if sink is None else np.maximum(s.max(axis=1, keepdims=True), sink)
    p = np.exp(s - m)
    total = p.sum(axis=1, keepdims=True) + (0.0 if sink is None else np.exp(sink - m))
    if keep is not None:
        p = p * keep / (1 - dropout_p)
    return (p / total) @ exact(v)


def _dropout_mask(seed: int, seqlen: int, tile: int, dropout_p: float):
    """The kernel's keep mask (see the module docstring): tile (i, j) drawn after seeding with seed + i * n + j."""
    n = seqlen // tile
    keep = np.ones((seqlen, seqlen))
    for i in range(n):
        for j in range(n):
            draw = np.random.default_rng(seed + i * n + j).random((tile, tile), np.float32)
            keep[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile] = draw >= np.float32(dropout_p)
    return keep


@pytest.mark.parametrize(
    "config",
    [FlashConfig(), FlashConfig(seq_tile_size=64, causal=False), FlashConfig(seq_tile_size=64, sliding_window=96)],
    ids=["causal-128", "full-64", "causal-sliding-window-96"],
)
def test_flash_fwd_with_a_config_argument(config):
    d, seqlen = 64, 256
    q, k = rand((d, seqlen), BF16, seed=41), rand((d, seqlen), BF16, seed=42)
    v = rand((seqlen, d), BF16, seed=43)
    got = flash_fwd(q, k, v, None, config=config)
    assert got.dtype == BF16
    # seed, config, scale and dtype are constants. (Asked of nki.trace, not of a trace hook: the hook fires only for
    # a first trace, and another test of this file may have traced the same call already.)
    assert nki.trace(flash_fwd, q, k, v, None, config=config).param_names == ["q", "k", "v"]
    # Error budget: p is rounded to bf16 (2^-9 relative each) before the PV matmul, so the weighted mean of v is
    # off by at most 2^-9 * max|v|; the output is rounded to bf16 once more (2^-9 relative, 2^-8 to be safe).
    want = _attention(q, k, v, 1 / math.sqrt(d), config.causal, config.sliding_window)
    np.testing.assert_allclose(exact(got), want, rtol=2**-8, atol=2**-9 * np.abs(exact(v)).max())


def test_flash_fwd_on_the_simulator_matches_the_reference():
    d, seqlen = 64, 256
    q, k, v = rand((d, seqlen), BF16, seed=44), rand((d, seqlen), BF16, seed=45), rand((seqlen, d), BF16, seed=46)
    out, profile = nki.simulate(flash_fwd, q, k, v, None, config=FlashConfig(), target="trn2")
    np.testing.assert_array_equal(out, flash_fwd(q, k, v, None, config=FlashConfig()))
    assert profile.latency_ns > 0


@pytest.mark.parametrize(
    "config, sinks, dropout_p",
    [(FlashConfig(), True, 0.0), (FlashConfig(seq_tile_size=64, causal=False), False, 0.2),
     (FlashConfig(seq_tile_size=64, sliding_window=96), True, 0.3)],
    ids=["causal-sinks", "full-dropout", "causal-window-sinks-dropout"],
)  # fmt: skip
def test_flash_fwd_with_sinks_and_dropout(config, sinks, dropout_p):
    d, seqlen, seed = 64, 256, 77
    q, k = rand((d, seqlen), BF16, seed=47), rand((d, seqlen), BF16, seed=48)
    v = rand((seqlen, d), BF16, seed=49)
    sink = np.array([0.75], np.float32) if sinks else None
    got = flash_fwd(q, k, v, np.array([seed], np.int32), sink, dropout_p=dropout_p, config=config)
    keep = _dropout_mask(seed, seqlen, config.seq_tile_size, dropout_p) if dropout_p else None
    want = _attention(q, k, v, 1 / math.sqrt(d), config.causal, config.sliding_window,
                      None if sink is None else float(sink[0]), keep, dropout_p)  # fmt: skip
    # The error budget of test_flash_fwd_with_a_config_argument, the values scaled by up to 1 / (1 - p).
    np.testing.assert_allclose(exact(got), want, rtol=2**-8, atol=2**-9 * np.abs(exact(v)).max() / (1 - dropout_p))
    if dropout_p:
        other = flash_fwd(q, k, v, np.array([seed + 1], np.int32), sink, dropout_p=dropout_p, config=config)
        assert np.abs(exact(other) - want).max() > 10 * 2**-9 * np.abs(exact(v)).max()  # the mask is the seed's
    sim, _ = nki.simulate(flash_fwd, q, k, v, np.array([seed], np.int32), sink, dropout_p=dropout_p, config=config,
                          target="trn2")  # fmt: skip
    np.testing.assert_array_equal(sim, got)
