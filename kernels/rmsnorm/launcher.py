"""The user-facing RMSNorm: checks the shapes, picks the launch (one instance; the kernel loops over row tiles)
and runs it.

``plan_rmsnorm`` is what the Hub bundle builder traces for each declared specialisation; it passes the caller's
arrays to the kernel unchanged and in order, so a loader without this Python can match a call to the published IR.
A concrete row length runs ``kernel.rmsnorm_kernel`` with ``epsilon`` a compile-time constant; a shape family over
the row length runs ``widths.rmsnorm_widths``, which takes ``epsilon`` at run time (a one-element float32 array
after the arrays: the manifest's ``scalars``), so one published IR serves every epsilon.
"""

import operator

import numpy as np

import nki_dsl as nki

from .kernel import rmsnorm_kernel
from .widths import rmsnorm_widths

# [128, W] tiles of x, its fp32 squares, x * rstd and the result: at 16384 columns fp32 both kernels still fit a
# trn2 partition's SBUF (224 KiB, reference/nki.md §1.2), at 20480 neither does (bf16's concrete kernel goes a
# little further, its family does not: one limit for every dtype).
MAX_COLUMNS = 16384
# RMSNorm is a floating-point computation (a reciprocal square root); integer inputs are refused rather than run.
DTYPES = ("float32", "bfloat16", "float16")


def plan_rmsnorm(x, g, epsilon=1e-6):
    if len(x.shape) != 2 or len(g.shape) != 1 or g.shape[0] != x.shape[1]:
        raise ValueError(f"rmsnorm takes x (rows, n) and g (n,), got {tuple(x.shape)} and {tuple(g.shape)}")
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"rmsnorm: at most {MAX_COLUMNS} columns per row (the row tile's tensors stay in SBUF), "
                         f"got {x.shape[1]}")  # fmt: skip
    dtype = np.dtype(x.dtype).name
    if dtype not in DTYPES or np.dtype(g.dtype).name != dtype:
        raise ValueError(f"rmsnorm: x and g must share a dtype among {', '.join(DTYPES)}, got {np.dtype(x.dtype).name} "
                         f"and {np.dtype(g.dtype).name}")  # fmt: skip
    if _static(x.shape[1]) is None:  # a shape family over the row length (kernel.toml): epsilon at run time
        return rmsnorm_widths, (x, g, np.full((1,), epsilon, np.float32)), {}
    return rmsnorm_kernel, (x, g), {"epsilon": float(epsilon)}


def _static(n):
    """``n`` as an int, or None for a shape family's symbolic dimension."""
    try:
        return operator.index(n)
    except nki.InconclusiveDimensionError:
        return None


def rmsnorm(x, g, epsilon=1e-6, *, backend: str | None = None):
    """RMSNorm of each row of ``x`` scaled by ``g``."""
    launch, args, kwargs = plan_rmsnorm(x, g, epsilon)
    return launch(*args, backend=backend, **kwargs)
