"""The user-facing LayerNorm: checks the shapes, passes epsilon as a compile-time constant, runs.

``plan_layernorm`` is what the Hub bundle builder traces for each declared specialisation (arrays unchanged and
in order, so a loader without this Python can match a call to the published IR). A concrete row length runs
``kernel.layernorm_kernel`` with ``epsilon`` a compile-time constant; a shape family over the row length runs
``widths.layernorm_widths``, which takes ``epsilon`` at run time (a one-element float32 array after the arrays: the
manifest's ``scalars``), so one published IR serves every epsilon."""

import operator

import numpy as np

import nki_dsl as nki

from .kernel import layernorm_kernel
from .widths import layernorm_widths

# One row tile in SBUF several times over (input, normalised, scaled, shifted) beside gamma's and beta's broadcasts:
# 16384 columns of a 2-byte dtype fit a trn2 partition (224 KiB, reference/nki.md §1.2); float32 stops at 8192 (at
# 12288 the concrete kernel no longer fits; the width families are sized for 8192).
MAX_COLUMNS = 16384
MAX_COLUMNS_FLOAT32 = 8192
# LayerNorm is a floating-point computation (bn_stats, rsqrt); integer inputs are refused rather than run.
DTYPES = ("float32", "bfloat16", "float16")


def max_columns(dtype: str) -> int:
    return MAX_COLUMNS_FLOAT32 if dtype == "float32" else MAX_COLUMNS


def plan_layernorm(x, gamma, beta, epsilon=1e-6):
    if len(x.shape) != 2 or tuple(gamma.shape) != (x.shape[1],) or tuple(beta.shape) != (x.shape[1],):
        raise ValueError(f"layernorm takes x (rows, n), gamma (n,), beta (n,); got {tuple(x.shape)}, "
                         f"{tuple(gamma.shape)}, {tuple(beta.shape)}")  # fmt: skip
    dtype = np.dtype(x.dtype).name
    if dtype not in DTYPES or any(np.dtype(v.dtype).name != dtype for v in (gamma, beta)):
        raise ValueError(f"layernorm: x, gamma and beta must share a dtype among {', '.join(DTYPES)}, got "
                         f"{dtype}, {np.dtype(gamma.dtype).name}, {np.dtype(beta.dtype).name}")  # fmt: skip
    if x.shape[1] > max_columns(dtype):
        raise ValueError(f"layernorm: at most {max_columns(dtype)} columns per row in {dtype} (the row tile's "
                         f"tensors stay in SBUF), got {x.shape[1]}")  # fmt: skip
    if _static(x.shape[1]) is None:  # a shape family over the row length (kernel.toml): epsilon at run time
        return layernorm_widths, (x, gamma, beta, np.full((1,), epsilon, np.float32)), {}
    return layernorm_kernel, (x, gamma, beta), {"epsilon": float(epsilon)}


def _static(n):
    """``n`` as an int, or None for a shape family's symbolic dimension."""
    try:
        return operator.index(n)
    except nki.InconclusiveDimensionError:
        return None


def layernorm(x, gamma, beta, epsilon=1e-6, *, backend: str | None = None):
    """LayerNorm of each row of ``x`` with per-column ``gamma`` and ``beta``."""
    launch, args, kwargs = plan_layernorm(x, gamma, beta, epsilon)
    return launch(*args, backend=backend, **kwargs)
