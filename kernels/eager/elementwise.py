"""Eager elementwise kernels over a 2-D ``[rows, cols]`` view: bias add, GELU (tanh approximation), residual
add and scaling by a constant. Each is one framework op: read its inputs from HBM, write its output to HBM.

They are bound by DMA, so the tiling serves the DMA engines (reference/nki.md §3.4: a transfer needs >= 2-4 KiB
per partition to approach peak): each partition takes ``r`` consecutive rows (one contiguous run in HBM), ``r``
the smallest divisor of the row count that makes a partition move at least 4 KiB (``rows_per_partition``); the
last tile is masked. The bias of ``bias_add`` is spread over the partitions once (broadcast DMAs), repeated r
times along the free axis.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
TARGET_BYTES = 4096  # per partition per transfer: the DMA efficiency curve's fully amortised size (§3.4)


def rows_per_partition(rows: int, cols: int, itemsize: int, most: int = 64) -> int:
    """Rows r each partition takes (r must divide ``rows``: the tensor is viewed as [rows / r, r * cols], each
    partition's r rows one contiguous run): the smallest divisor (at most ``most``) for which r rows make a
    >= 4 KiB transfer per partition; if there is none, the largest smaller one (fewer, larger transfers still:
    e.g. 2,364 rows of 64 bf16, whose divisors jump from 12 to 197, take 12)."""
    want = math.ceil(TARGET_BYTES / (cols * itemsize))
    divisors = [r for r in range(1, min(rows, most) + 1) if rows % r == 0]
    return next((r for r in divisors if r >= want), divisors[-1] if divisors else 1)


def _apply(op, a, b, extra, dtype, mask=None):
    if op == "add":
        return nisa.tensor_tensor(a, b, np.add, dtype=dtype, mask=mask)
    if op == "gelu":
        return nisa.activation(nl.gelu_apprx_tanh, a, dtype=dtype, mask=mask)
    return nisa.tensor_scalar(a, np.multiply, float(extra), dtype=dtype, mask=mask)  # "scale"


def _elementwise(x, y, op, extra=1.0):
    """``out = op(x, y)`` over ``[rows, cols]``; ``y`` is a full tensor, a bias row (``y.shape == (cols,)``,
    spread over the rows), or None for unary ops."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    r = rows_per_partition(rows, cols, np.dtype(x.dtype).itemsize)
    n_rows, width = rows // r, r * cols
    # Viewed as [rows / r, r * cols]: each partition's r rows are one contiguous run in HBM.
    bias_row = y is not None and len(y.shape) == 1
    views = [a.reshape((n_rows, width)) for a in ((x, out) if y is None or bias_row else (x, out, y))]
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    if bias_row:
        row = nl.load(y.reshape((1, cols)))
        bias = nl.ndarray((nl.par_dim(PMAX), width), dtype=y.dtype)
        for k in range(r):
            bias[i_p, k * cols + nl.arange(cols)[None, :]] = row.broadcast_to((PMAX, cols))
    for t in nl.affine_range(math.ceil(n_rows / PMAX)):
        idx = t * PMAX + i_p
        ok = idx < n_rows
        a = nl.load(views[0][idx, i_w], mask=ok)
        b = bias if bias_row else (nl.load(views[2][idx, i_w], mask=ok) if y is not None else None)
        nl.store(views[1][idx, i_w], value=_apply(op, a, b, extra, x.dtype, mask=ok), mask=ok)
    return out


@nki.jit
def bias_add_kernel(x, b):
    return _elementwise(x, b, "add")


@nki.jit
def add_kernel(x, y):
    return _elementwise(x, y, "add")


@nki.jit
def gelu_kernel(x):
    return _elementwise(x, None, "gelu")


@nki.jit
def scale_kernel(x, scale=1.0):
    return _elementwise(x, None, "scale", scale)
