"""The five kernels the NumPy-reference benchmark times, each beside the same math in plain NumPy. The tiled matmul
and the ViT attention are the library's (``kernels/matmul``, ``kernels/vit_attn`` in the (batch, heads, seq,
head_dim) layout), not copies."""

from __future__ import annotations

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.matmul import matmul_tiled
from kernels.vit_attn.kernel import attention_kernel as vit_attention


@nki.jit
def softmax_rows(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f])
        e = nl.exp(tile - nl.max(tile, axis=1, keepdims=True))
        nl.store(out[i_p, i_f], value=e / nl.sum(e, axis=1, keepdims=True))
    return out


@nki.jit
def rmsnorm(x, weight, eps=1e-6):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    w = nl.load(weight.reshape((1, cols))[nl.arange(1)[:, None], i_f])
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f])
        inv_rms = nl.rsqrt(nl.mean(nl.square(tile), axis=1, keepdims=True) + eps)
        nl.store(out[i_p, i_f], value=tile * inv_rms * w.broadcast_to((128, cols)))
    return out


@nki.jit
def layernorm(x, gamma, beta, eps=1e-5):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    i_one = nl.arange(1)[:, None]
    g = nl.load(gamma.reshape((1, cols))[i_one, i_f])
    b = nl.load(beta.reshape((1, cols))[i_one, i_f])
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f])
        mean = nl.mean(tile, axis=1, keepdims=True)
        centered = tile - mean
        var = nl.mean(nl.square(centered), axis=1, keepdims=True)
        nl.store(out[i_p, i_f], value=centered * nl.rsqrt(var + eps) * g + b)
    return out


# Plain NumPy, the same math, for the baseline.
def np_matmul(lhsT, rhs):
    return lhsT.T @ rhs


def np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_rmsnorm(x, weight, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * weight


def np_layernorm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    centered = x - mean
    return centered / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps) * gamma + beta


def np_attention(q, k, v, scale):
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p @ v) / p.sum(axis=-1, keepdims=True)


def cases(rng: np.random.Generator):
    """(name, kernel, numpy function, args) for each benchmark kernel, float32 inputs."""
    f32 = np.float32
    a, b = rng.standard_normal((512, 512)).astype(f32), rng.standard_normal((512, 512)).astype(f32)
    sm = rng.standard_normal((4096, 512)).astype(f32)
    x = rng.standard_normal((4096, 1024)).astype(f32)
    w, g, bt = (rng.standard_normal(1024).astype(f32) for _ in range(3))
    q, k, v = (rng.standard_normal((1, 12, 197, 64)).astype(f32) for _ in range(3))
    return [
        ("matmul 512x512x512", matmul_tiled, np_matmul, (a, b)),
        ("softmax 4096x512", softmax_rows, np_softmax, (sm,)),
        ("rmsnorm 4096x1024", rmsnorm, np_rmsnorm, (x, w)),
        ("layernorm 4096x1024", layernorm, np_layernorm, (x, g, bt)),
        ("vit attention 12x197x64", vit_attention, np_attention, (q, k, v, 0.125)),
    ]
