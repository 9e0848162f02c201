"""The five cases the reference benchmarks time (``numpy_ref_speed``, ``jax_speed``, ``simulator_overhead``): a
library kernel, its inputs and the same math in plain NumPy. The kernels are the library's: the tiled matmul
(``kernels/matmul``), the ``nl``-operator softmax, RMSNorm and LayerNorm (``whole_row`` in ``kernels/softmax``,
``kernels/rmsnorm``, ``kernels/layernorm``) and the ViT attention (``kernels/vit_attn``, in the (batch, heads, seq,
head_dim) layout)."""

from __future__ import annotations

import numpy as np

from kernels.layernorm import layernorm_rows
from kernels.matmul import matmul_tiled
from kernels.rmsnorm import rmsnorm_rows
from kernels.softmax import softmax_rows
from kernels.vit_attn.kernel import attention_kernel as vit_attention


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
        ("rmsnorm 4096x1024", rmsnorm_rows, np_rmsnorm, (x, w)),
        ("layernorm 4096x1024", layernorm_rows, np_layernorm, (x, g, bt)),
        ("vit attention 12x197x64", vit_attention, np_attention, (q, k, v, 0.125)),
    ]
