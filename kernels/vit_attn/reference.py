"""The NumPy references the kernels are checked against: computed in float64 from the inputs as given (already
rounded to their dtype), returned in the input's dtype. ``strategy`` (the launchers' schedule: the resident strip or
flash) and ``evict`` (the engines of its PSUM copies) do not change the numbers; the references take them so that a
specialisation publishing them is checked."""

import numpy as np


def attention(q, k, v, scale=None, strategy="auto", evict="auto"):
    """``softmax(scale * q k^T) v`` over (batch, heads, seq, head_dim); scale defaults to 1/sqrt(head_dim)."""
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = q64.shape[-1] ** -0.5 if scale is None else float(scale)
    s = scale * (q64 @ np.swapaxes(k64, -1, -2))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)) @ v64).astype(q.dtype)


def attention_qkv(qkv, num_heads, scale=None, strategy="auto", evict="auto"):
    """The same from ``(batch, seq, 3 * heads * head_dim)`` to ``(batch, seq, heads * head_dim)``."""
    b, s, width = qkv.shape
    d = width // (3 * num_heads)
    split = np.asarray(qkv).reshape(b, s, 3, num_heads, d).transpose(2, 0, 3, 1, 4)  # (3, b, h, s, d)
    out = attention(split[0], split[1], split[2], scale)
    return out.transpose(0, 2, 1, 3).reshape(b, s, num_heads * d)


def attention_split(qkT, v, num_heads, seq=None, batch=None, strategy="auto", evict="auto"):
    """The same from the split layout: ``qkT`` (2 * hd, batch * seq) = [q^T; (scale * k)^T], ``v`` (batch * seq,
    hd); returns (batch * seq, hd). The scale is already in k (scale 1 here). ``seq`` or ``batch`` is given."""
    two_hd, tokens = qkT.shape
    seq = tokens // batch if seq is None else seq
    hd, batch = two_hd // 2, tokens // seq
    d = hd // num_heads
    f = np.asarray(qkT, np.float64)
    q = f[:hd].T.reshape(batch, seq, num_heads, d).transpose(0, 2, 1, 3)
    k = f[hd:].T.reshape(batch, seq, num_heads, d).transpose(0, 2, 1, 3)
    vv = np.asarray(v, np.float64).reshape(batch, seq, num_heads, d).transpose(0, 2, 1, 3)
    out = attention(q, k, vv, scale=1.0)
    return out.transpose(0, 2, 1, 3).reshape(tokens, hd).astype(v.dtype)
