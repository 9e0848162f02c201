"""The NumPy reference the kernel is checked against: computed in float64, returned in the input's dtype."""

import numpy as np


def gelu_tanh(x):
    """GELU, tanh approximation (as ViT uses): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def linear(x, w, b=None, residual=None, epilogue="none"):
    y = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    if epilogue != "none":
        y = y + np.asarray(b, np.float64)
    if epilogue == "gelu":
        y = gelu_tanh(y)
    elif epilogue == "residual":
        y = y + np.asarray(residual, np.float64)
    return y.astype(x.dtype)


def mlp(x, w1, b1, w2, b2, residual, schedule=None):
    """``residual + gelu(x @ w1 + b1) @ w2 + b2`` in float64 (``schedule``, how the kernel runs, a streamed family's
    constant, changes nothing)."""
    f = [np.asarray(a, np.float64) for a in (x, w1, b1, w2, b2, residual)]
    return (f[5] + gelu_tanh(f[0] @ f[1] + f[2]) @ f[3] + f[4]).astype(x.dtype)


def layer_norm(x, gamma, beta, epsilon=1e-6):
    """LayerNorm of each row in float64 (biased variance, as PyTorch)."""
    f = np.asarray(x, np.float64)
    m = f.mean(-1, keepdims=True)
    v = ((f - m) ** 2).mean(-1, keepdims=True)
    return (f - m) / np.sqrt(v + epsilon) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def layernorm_linear(x, gamma, beta, w, b=None, epsilon=1e-6, epilogue="none"):
    return linear(layer_norm(x, gamma, beta, epsilon), w, b, None, epilogue).astype(x.dtype)


def layernorm_mlp(x, gamma, beta, w1, b1, w2, b2, epsilon=1e-6, schedule=None):
    return mlp(layer_norm(x, gamma, beta, epsilon), w1, b1, w2, b2, x).astype(x.dtype)


def layernorm_qkv(x, gamma, beta, w, b, scale=None, epsilon=1e-6, num_heads=None):
    """``(qkT, v)``: [q^T; (scale * k)^T] (2 * hd, M) and v (M, hd) of ``LN(x) @ w + b``."""
    hd = w.shape[1] // 3
    scale = (hd // int(num_heads)) ** -0.5 if scale is None else float(scale)
    y = layer_norm(x, gamma, beta, epsilon) @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
    qkT = np.concatenate([y[:, :hd].T, scale * y[:, hd:2 * hd].T], 0)
    return qkT.astype(x.dtype), y[:, 2 * hd:].astype(x.dtype)
