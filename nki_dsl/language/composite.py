"""Legacy ``nl`` functions that NKI itself expands into several instructions (``nl.softmax``, ``nl.rms_norm``),
written here as compositions of op-table ops so every backend and the verifier see only primitive ops."""

from __future__ import annotations

from nki_dsl.language import math as m


def _axes(axis) -> tuple[int, ...]:
    return (axis,) if isinstance(axis, int) else tuple(int(a) for a in axis)


def softmax(x, axis, *, dtype=None, compute_dtype=None, mask=None):
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` along free axes ``axis``, computed in ``compute_dtype``
    (fp32 by default) and rounded to ``dtype`` (``x``'s dtype by default)."""
    cd = compute_dtype or "float32"
    axes = _axes(axis)
    row_max = m.max(x, axes, keepdims=True, dtype=cd, mask=mask)
    e = m.exp(m.subtract(x, row_max, dtype=cd, mask=mask), dtype=cd, mask=mask)
    inv = m.reciprocal(m.sum(e, axes, keepdims=True, dtype=cd, mask=mask), dtype=cd, mask=mask)
    return m.multiply(e, inv, dtype=dtype or x.dtype, mask=mask)


def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None):
    """``x / sqrt(sum(x^2) / n + epsilon) * w`` along free axes ``axis``; ``n`` is the count the mean divides by
    and ``w`` broadcasts against ``x`` (a ``[1, F]`` weight row is repeated across partitions)."""
    cd = compute_dtype or "float32"
    axes = _axes(axis)
    sq_sum = m.sum(m.square(x, dtype=cd, mask=mask), axes, keepdims=True, dtype=cd, mask=mask)
    rstd = m.rsqrt(m.add(m.multiply(sq_sum, 1.0 / n, dtype=cd, mask=mask), epsilon, dtype=cd, mask=mask),
                   dtype=cd, mask=mask)  # fmt: skip
    return m.multiply(m.multiply(x, rstd, dtype=cd, mask=mask), w, dtype=dtype or x.dtype, mask=mask)
