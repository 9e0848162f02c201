"""Independent NumPy formulas the NKI-style kernels are checked against, computed in float64 from the inputs as
the kernel receives them (already rounded to their dtype), plus the comparison helper."""

import numpy as np

import nki_dsl.language as nl

F32 = np.float32
LOW_PRECISION = {"bf16": nl.bfloat16, "fp16": nl.float16}


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def randn(rng, shape, dtype=F32, scale=1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(dtype)


def assert_close(actual, expected, rtol, atol):
    actual = f64(actual)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    err = np.abs(actual - expected)
    worst = np.unravel_index(np.argmax(err - rtol * np.abs(expected)), err.shape)
    assert np.allclose(actual, expected, rtol=rtol, atol=atol), (
        f"max |err| {err.max():.3g} at {worst}: {actual[worst]} vs {expected[worst]} (rtol={rtol}, atol={atol})"
    )


def softmax(x, axis=-1):
    x = f64(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rmsnorm(x, g, eps=0.0):
    x = f64(x)
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + eps) * f64(g)


def layernorm(x, gamma, beta, eps):
    x = f64(x)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * f64(gamma) + f64(beta)


def avgpool(x, pool):
    """Floor-mode average pooling of ``[C, H, W]`` over ``pool x pool`` windows."""
    c, h, w = x.shape
    ho, wo = h // pool, w // pool
    return f64(x)[:, :ho * pool, :wo * pool].reshape(c, ho, pool, wo, pool).mean(axis=(2, 4))


def attention(q, k, v, scale, causal):
    """``softmax(scale * q @ k.T) @ v`` for ``[S, d]`` operands; causal keeps key j <= query i."""
    s = scale * (f64(q) @ f64(k).T)
    if causal:
        s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
    return softmax(s) @ f64(v)


def selective_scan(delta, u, A, B, C):
    """Mamba's SSM: ``h[t] = exp(delta[t] A) h[t-1] + delta[t] u[t] B[t]``, ``y[t] = C[t] . h[t]`` per channel.
    ``delta``, ``u``: [batch, channels, seq]; ``A``: [channels, state]; ``B``, ``C``: [batch, state, seq]."""
    delta, u, A, B, C = map(f64, (delta, u, A, B, C))
    batch, channels, seq = delta.shape
    h = np.zeros((batch, channels, A.shape[1]))
    y = np.zeros((batch, channels, seq))
    for t in range(seq):
        h = np.exp(delta[:, :, t, None] * A) * h + (delta[:, :, t] * u[:, :, t])[:, :, None] * B[:, None, :, t]
        y[:, :, t] = np.einsum("bcn,bn->bc", h, C[:, :, t])
    return y
