"""The legacy-API flash-attention backward (tests/kernels/legacy/flash_bwd.py, in the style of AWS's
``flash_attn_bwd``) against a float64 NumPy formula for dq, dk and dv: GQA (4 query heads on 2 KV heads), causal and
full, a sliding window, attention sinks (and their gradient), dropout, fp32 and bf16 Tensor-engine operands, on the
NumPy reference and on the simulator. The float64 formula is itself checked against finite differences.

Dropout masks: the kernel seeds the generator per (batch, head, query tile, key tile) with ``seed + offset`` and
``nl.dropout`` keeps an element where its uniform draw is ``>= p`` (nki_dsl/backends/numpy_ref/runtime.py
``RandomState``: NumPy's ``default_rng(seed).random(shape, float32)``, one draw per element of the tile in row-major
order). ``_dropout_mask`` draws the same numbers, so the formula applies the kernel's mask exactly."""

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.backend_fixture import backend_independent
from tests.kernels.legacy.flash_bwd import FlashConfig, flash_attn_bwd

BS, HEADS, KV_HEADS, D, SEQ = 1, 4, 2, 32, 512
GROUP = HEADS // KV_HEADS
SCALE = 1 / np.sqrt(D)


@dataclass(frozen=True)
class Features:
    """What a case turns on besides the config: a sliding window, sinks, dropout."""

    window: int = 0
    sinks: bool = False
    dropout_p: float = 0.0
    seed: int = 1234


def _scores(q, k, causal, window=0):
    s = SCALE * np.einsum("bhdq,bhdk->bhqk", q, np.repeat(k, GROUP, axis=1))
    behind = np.arange(SEQ)[:, None] - np.arange(SEQ)[None, :]  # query position - key position
    if causal:
        s = np.where(behind >= 0, s, -np.inf)
    if window:
        s = np.where(behind < window, s, -np.inf)
    return s


def _dropout_mask(f: Features, k_tile: int):
    """1 where the kernel keeps an element of P, per (batch, head, query tile, key tile), as the module
    docstring says it draws them."""
    keep = np.ones((BS, HEADS, SEQ, SEQ))
    if not f.dropout_p:
        return keep
    n_q, n_k = SEQ // 128, SEQ // k_tile
    for b, h, i, j in itertools.product(range(BS), range(HEADS), range(n_q), range(n_k)):
        draw = np.random.default_rng(f.seed + ((b * HEADS + h) * n_q + i) * n_k + j).random((128, k_tile), np.float32)
        keep[b, h, i * 128:(i + 1) * 128, j * k_tile:(j + 1) * k_tile] = draw >= np.float32(f.dropout_p)
    return keep


def _lse(s, sinks):
    """log(sum_j exp(s_ij) (+ exp(sink_h))) per row, float64."""
    m = s.max(-1, keepdims=True)
    if sinks is not None:
        m = np.maximum(m, sinks[None, :, None, None])
    total = np.exp(s - m).sum(-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sinks[None, :, None, None] - m)
    return (m + np.log(total))[..., 0]


def _forward(q, k, v, causal, window=0, sinks=None, keep=None, p_drop=0.0):
    """o and the log-sum-exp of each query row, float64: the kernel's inputs besides q, k, v, dy."""
    s = _scores(q, k, causal, window)
    lse = _lse(s, sinks)
    p = np.exp(s - lse[..., None])
    if keep is not None:
        p = p * keep / (1 - p_drop)
    return np.einsum("bhqk,bhdk->bhdq", p, np.repeat(v, GROUP, axis=1)), lse


def _backward(q, k, v, o, dy, lse, causal, window=0, sinks=None, keep=None, p_drop=0.0):
    """dq, dk, dv (and dsinks per batch) in float64 from the same (rounded) inputs the kernel gets; dk, dv summed
    over each KV group."""
    p = np.exp(_scores(q, k, causal, window) - lse[..., None])
    scaled_keep = 1.0 if keep is None else keep / (1 - p_drop)
    d_row = (dy * o).sum(axis=2)  # D = rowsum(dO * O), [b, h, q]
    dp = np.einsum("bhdq,bhdk->bhqk", dy, np.repeat(v, GROUP, axis=1)) * scaled_keep
    ds = p * (dp - d_row[..., None])
    dq = SCALE * np.einsum("bhqk,bhdk->bhdq", ds, np.repeat(k, GROUP, axis=1))
    dk = SCALE * np.einsum("bhqk,bhdq->bhdk", ds, q)
    dv = np.einsum("bhqk,bhdq->bhdk", p * scaled_keep, dy)

    def per_kv_head(x):
        return x.reshape(BS, KV_HEADS, GROUP, D, SEQ).sum(axis=2)

    grads = (dq, per_kv_head(dk), per_kv_head(dv))
    if sinks is None:
        return grads
    dsinks = -(np.exp(sinks[None, :, None] - lse) * d_row).sum(axis=2)  # [b, h]
    return (*grads, dsinks)


def _case(causal, seed=0, f: Features = Features(), k_tile=256):
    rng = np.random.default_rng(seed)
    q, dy = (rng.standard_normal((BS, HEADS, D, SEQ)) for _ in range(2))
    k, v = (rng.standard_normal((BS, KV_HEADS, D, SEQ)) for _ in range(2))
    sinks = rng.standard_normal(HEADS).astype(np.float32).astype(np.float64) if f.sinks else None
    keep = _dropout_mask(f, k_tile) if f.dropout_p else None
    o, lse = _forward(q, k, v, causal, f.window, sinks, keep, f.dropout_p)
    lse_tiles = lse.reshape(BS, HEADS, SEQ // 128, 128).transpose(0, 1, 3, 2)  # AWS's [b, h, 128, seq // 128]
    args = [a.astype(np.float32) for a in (q, k, v, o, dy, lse_tiles)]
    lse32 = args[5].transpose(0, 1, 3, 2).reshape(BS, HEADS, SEQ)
    want = _backward(*(a.astype(np.float64) for a in args[:5]), lse32.astype(np.float64), causal, f.window, sinks,
                     keep, f.dropout_p)  # fmt: skip
    extra = {"seed": np.array([f.seed], np.int32), "dropout_p": f.dropout_p, "sliding_window": f.window}
    if f.sinks:
        extra["sinks"] = sinks.astype(np.float32)
    return args, want, extra


CONFIGS = {  # key tiles of 256 keys: two key tiles, four query tiles, two transposed dS blocks per pair
    "causal-fp32": FlashConfig(k_tile_size=256, causal=True, mixed_precision=False),
    "full-fp32": FlashConfig(k_tile_size=256, causal=False, mixed_precision=False),
    "causal-bf16": FlashConfig(k_tile_size=256, causal=True, mixed_precision=True),
}
# Relative to each gradient's largest entry. fp32: sums of at most SEQ * GROUP fp32 products (a few ulps of 2^-24
# each, measured below 1e-6). bf16: P, dS and the operands rounded to bf16 (2^-9 relative each) before three
# chained matmuls; measured below 1e-2.
TOLERANCE = {"fp32": 1e-5, "bf16": 3e-2}


def _assert_gradients(got, want, precision):
    labels = ("dq", "dk", "dv", "dsinks")[-len(want):] if len(want) == 1 else ("dq", "dk", "dv", "dsinks")
    for label, g, w in zip(labels[: len(want)], got, want, strict=True):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == np.float32, label
        np.testing.assert_allclose(g, w, rtol=0, atol=TOLERANCE[precision] * np.abs(w).max(), err_msg=label)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gradients_match_the_float64_formula(name):
    args, want, _ = _case(CONFIGS[name].causal)
    _assert_gradients(flash_attn_bwd[BS, KV_HEADS](*args, config=CONFIGS[name]), want, name.split("-")[1])


FEATURES = {  # windows of 200 and 300 keys cut key tiles of 256 in the middle and leave some pairs wholly outside
    "causal-window": ("causal-fp32", Features(window=200)),
    "full-window": ("full-fp32", Features(window=300)),
    "causal-sinks": ("causal-fp32", Features(sinks=True)),
    "causal-dropout": ("causal-fp32", Features(dropout_p=0.25)),
    "window-sinks-dropout-bf16": ("causal-bf16", Features(window=200, sinks=True, dropout_p=0.1)),
}


# The JAX side of these compiles a fresh XLA program per case (~6 s each): it runs in the slow suite.
NUMPY_THEN_SLOW_JAX = pytest.mark.parametrize(
    "kernel_backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)], indirect=True)
ONCE = pytest.mark.parametrize("kernel_backend", ["numpy"], indirect=True)  # no plain kernel call to vary


@NUMPY_THEN_SLOW_JAX
@pytest.mark.parametrize("name", list(FEATURES))
def test_window_sinks_and_dropout_match_the_float64_formula(name, kernel_backend):
    config_name, features = FEATURES[name]
    config = CONFIGS[config_name]
    args, want, extra = _case(config.causal, seed=3, f=features, k_tile=config.k_tile_size)
    got = flash_attn_bwd[BS, KV_HEADS](*args, config=config, **extra)
    if features.dropout_p and kernel_backend != "numpy":
        # The JAX backend draws its own stream (jax.random), not the mask _dropout_mask reproduces: what holds
        # there is the sink gradient, which the mask does not enter (D comes from o and dy).
        assert all(np.isfinite(np.asarray(g)).all() for g in got)
        if features.sinks:
            _assert_gradients(got[3:], want[3:], config_name.split("-")[1])
        return
    _assert_gradients(got, want, config_name.split("-")[1])
    if features.dropout_p:  # the mask matters: the same call with another seed gives other gradients
        other = flash_attn_bwd[BS, KV_HEADS](*args, config=config, **{**extra, "seed": extra["seed"] + 1})
        assert np.abs(np.asarray(other[2]) - np.asarray(got[2])).max() > 10 * TOLERANCE["bf16"] * np.abs(want[2]).max()


@ONCE
def test_the_float64_formula_is_the_gradient_of_the_forward():
    """Finite differences of L = sum(O * dY) through the float64 forward (window, sinks, a fixed dropout mask)
    against _backward: the formula the kernel is compared with is the gradient, sinks included."""
    f = Features(window=200, sinks=True, dropout_p=0.25)
    rng = np.random.default_rng(9)
    q, dy = (rng.standard_normal((BS, HEADS, D, SEQ)) for _ in range(2))
    k, v = (rng.standard_normal((BS, KV_HEADS, D, SEQ)) for _ in range(2))
    sinks = rng.standard_normal(HEADS)
    keep = _dropout_mask(f, 256)

    def loss(q=q, k=k, v=v, sinks=sinks):
        return (_forward(q, k, v, True, f.window, sinks, keep, f.dropout_p)[0] * dy).sum()

    o, lse = _forward(q, k, v, True, f.window, sinks, keep, f.dropout_p)
    dq, dk, dv, dsinks = _backward(q, k, v, o, dy, lse, True, f.window, sinks, keep, f.dropout_p)
    eps = 1e-6
    for name, x, grad, at in (("q", q, dq, (0, 1, 3, 300)), ("k", k, dk, (0, 1, 5, 100)),
                              ("v", v, dv, (0, 0, 7, 250)), ("sinks", sinks, dsinks[0], (2,))):  # fmt: skip
        bumped = x.copy()
        bumped[at] += eps
        numeric = (loss(**{name: bumped}) - loss()) / eps
        np.testing.assert_allclose(grad[at], numeric, rtol=1e-4, atol=1e-6, err_msg=name)


@backend_independent
def test_the_simulator_gives_the_reference_numbers_and_a_timing():
    args, _, _ = _case(True, seed=1)
    config = CONFIGS["causal-bf16"]
    out, profile = nki.simulate(flash_attn_bwd[BS, KV_HEADS], *args, config=config, target="trn2")
    for got, want in zip(out, flash_attn_bwd[BS, KV_HEADS](*args, config=config, backend="numpy"), strict=True):
        np.testing.assert_array_equal(got, want)
    assert profile.latency_ns > 0


@ONCE
def test_the_simulator_runs_window_sinks_and_dropout_as_the_reference():
    config = CONFIGS["causal-bf16"]
    args, _, extra = _case(True, seed=4, f=Features(window=200, sinks=True, dropout_p=0.1))
    out, _ = nki.simulate(flash_attn_bwd[BS, KV_HEADS], *args, config=config, target="trn2", **extra)
    reference = flash_attn_bwd[BS, KV_HEADS](*args, config=config, backend="numpy", **extra)
    for got, want in zip(out, reference, strict=True):
        np.testing.assert_array_equal(got, want)


@backend_independent
def test_the_trace_mode_helper_is_inlined_and_the_config_is_a_constant():
    args, _, _ = _case(True, seed=2)
    traced = []
    hook = lambda kernel, target: traced.append(kernel)  # noqa: E731
    TRACE_HOOKS.append(hook)
    try:
        fresh = nki.jit(flash_attn_bwd.fn)  # empty trace cache: the hook sees every kernel traced
        nki.trace(fresh[BS, KV_HEADS], *args, config=FlashConfig(k_tile_size=256))
    finally:
        TRACE_HOOKS.remove(hook)
    assert [k.name for k in traced] == ["flash_attn_bwd"]  # no kernel of its own for _flash_attn_bwd_core
    assert [p.name for p in traced[0].params] == ["q", "k", "v", "o", "dy", "lse"]
