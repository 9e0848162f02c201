"""Legacy-API kernels in the style of AWS's reference set (tests/kernels/legacy/), each against a float64 NumPy
formula: on the NumPy reference and the JAX backend (conftest runs every test on both) and on the trn2 simulator.
The simulator runs once per test (under the NumPy parameter: its numbers come from the reference's code).
Tolerances: fp32 kernels a few fp32 roundings (1e-5 relative); bf16 matmul operands 2^-8 relative per product."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.kernels import formulas as ref
from tests.kernels.legacy import allocated_attention, allocated_rmsnorm_qkv, pooling, resize


@pytest.fixture
def check(kernel_backend):
    """``check(kernel, *args, rtol=, atol=, want=)``: the plain call (NumPy or JAX backend) and, once, the trn2
    simulator, against ``want``."""

    def run(kernel, *args, rtol, atol, want, **kwargs):
        ref.assert_close(np.asarray(kernel(*args, **kwargs)), want, rtol, atol)
        if kernel_backend == "numpy":
            out, profile = nki.simulate(kernel, *args, target="trn2", **kwargs)
            ref.assert_close(out, want, rtol, atol)
            assert profile.latency_ns > 0

    return run


# -- formulas -------------------------------------------------------------------------------------------------------


def attention(q, k, v):
    q, k, v = (ref.f64(x) for x in (q, k, v))
    return ref.softmax(q @ k.T / np.sqrt(q.shape[1])) @ v


def rms_norm_qkv(hidden, weights, eps=1e-6):
    h = ref.f64(hidden)
    return h / np.sqrt((h * h).mean(axis=-1, keepdims=True) + eps) @ ref.f64(weights)


def nearest(x, out_h, out_w):
    _, h, w, _ = x.shape
    rows, cols = (np.arange(out_h) * h) // out_h, (np.arange(out_w) * w) // out_w
    return ref.f64(x)[:, rows][:, :, cols]


def adaptive_avg_pool(x, out_h, out_w):
    c, h, w = x.shape
    out = np.zeros((c, out_h, out_w))
    for i in range(out_h):
        h0, h1 = (i * h) // out_h, -((-(i + 1) * h) // out_h)
        for j in range(out_w):
            w0, w1 = (j * w) // out_w, -((-(j + 1) * w) // out_w)
            out[:, i, j] = ref.f64(x)[:, h0:h1, w0:w1].mean(axis=(1, 2))
    return out


def select_and_scatter(operand, source, window, stride):
    c, _, _ = operand.shape
    _, out_h, out_w = source.shape
    out = np.zeros(operand.shape)
    for i in range(out_h):
        for j in range(out_w):
            win = ref.f64(operand)[:, stride * i:stride * i + window, stride * j:stride * j + window].reshape(c, -1)
            first = win.argmax(axis=1)  # the first maximum in row-major order
            np.add.at(out, (np.arange(c), stride * i + first // window, stride * j + first % window),
                      ref.f64(source)[:, i, j])
    return out


# -- direct allocation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seqlen, d_head", [(512, 64), (256, 128),
                                            pytest.param(1024, 32, marks=pytest.mark.slow)])
def test_allocated_self_attention_fp32(seqlen, d_head, check):
    rng = np.random.default_rng(seqlen + d_head)
    q, k, v = (ref.randn(rng, (seqlen, d_head)) for _ in range(3))
    check(allocated_attention.allocated_fused_self_attn_for_SD_small_head_size, q, k, v, mixed_precision=False,
          rtol=1e-4, atol=1e-5, want=attention(q, k, v))


def test_allocated_self_attention_mixed_precision(check):
    rng = np.random.default_rng(3)
    q, k, v = (ref.randn(rng, (512, 64)) for _ in range(3))
    check(allocated_attention.allocated_fused_self_attn_for_SD_small_head_size, q, k, v,
          rtol=2e-2, atol=1e-2, want=attention(q, k, v))


@pytest.mark.parametrize("shape, fused", [((2, 256, 256), 384), ((1, 128, 512), 1024)])
def test_allocated_rms_norm_qkv_fp32(shape, fused, check):
    rng = np.random.default_rng(fused)
    hidden, weights = ref.randn(rng, shape), ref.randn(rng, (shape[2], fused), scale=1 / 16)
    check(allocated_rmsnorm_qkv.allocated_fused_rms_norm_qkv, hidden, weights, rtol=1e-4, atol=1e-5,
          want=rms_norm_qkv(hidden, weights))


def test_allocated_rms_norm_qkv_bf16_norm_dtype(check):
    rng = np.random.default_rng(9)
    bf16 = ref.LOW_PRECISION["bf16"]
    hidden, weights = ref.randn(rng, (1, 256, 256), bf16), ref.randn(rng, (256, 384), bf16, scale=1 / 16)
    check(allocated_rmsnorm_qkv.allocated_fused_rms_norm_qkv, hidden, weights, norm_dtype=nl.bfloat16,
          rtol=3e-2, atol=3e-2, want=rms_norm_qkv(hidden, weights))


# -- indirect DMA and pooling ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("in_shape, out_hw", [((2, 5, 7, 48), (13, 17)), ((1, 16, 16, 32), (8, 8)),
                                              ((3, 4, 4, 16), (16, 16))])  # fmt: skip
def test_resize_nearest_gather_dma(in_shape, out_hw, check):
    x = ref.randn(np.random.default_rng(in_shape[1]), in_shape)
    out_shape = (in_shape[0], *out_hw, in_shape[3])
    check(resize.resize_nearest_gather_dma_kernel, x, out_shape, rtol=0, atol=0, want=nearest(x, *out_hw))


def test_resize_nearest_fixed_dma(check):
    x = ref.randn(np.random.default_rng(5), (2, 5, 7, 48))
    # one DMA per output pixel, unrolled: a small output keeps the unrolled program small
    check(resize.resize_nearest_fixed_dma_kernel, x, (2, 4, 6, 48), rtol=0, atol=0, want=nearest(x, 4, 6))


@pytest.mark.parametrize("shape, out_hw", [((130, 9, 11), (4, 5)), ((32, 10, 6), (3, 4)),
                                           pytest.param((64, 7, 7), (7, 7), marks=pytest.mark.slow)])
def test_adaptive_avg_pool2d(shape, out_hw, check):
    x = ref.randn(np.random.default_rng(shape[0]), shape)
    check(pooling.adaptive_avg_pool2d_kernel, x, out_hw, rtol=1e-6, atol=1e-6, want=adaptive_avg_pool(x, *out_hw))


@pytest.mark.parametrize("shape, window, stride", [((130, 9, 11), 3, 2), ((64, 8, 8), 2, 2)])
def test_select_and_scatter(shape, window, stride, check):
    rng = np.random.default_rng(window)
    operand = rng.integers(0, 4, shape).astype(np.float32)  # small integers: windows with tied maxima
    out_hw = ((shape[1] - window) // stride + 1, (shape[2] - window) // stride + 1)
    source = ref.randn(rng, (shape[0], *out_hw))
    check(pooling.select_and_scatter_kernel, operand, source, window, stride, rtol=1e-6, atol=1e-6,
          want=select_and_scatter(operand, source, window, stride))
