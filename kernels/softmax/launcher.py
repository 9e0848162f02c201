"""The user-facing softmax: checks the input, picks the launch (one instance; the kernel loops over row tiles
itself) and runs it.

``plan_softmax`` is what the Hub bundle builder traces for each declared specialisation; it passes the caller's
arrays to the kernel unchanged and in order, so a loader without this Python can match a call to the published IR.
"""

import operator

import numpy as np

import nki_dsl as nki

from .kernel import softmax_kernel
from .widths import softmax_widths

# One row tile of fp32 per partition: 8192 x 4 B = 32 KiB of a partition's SBUF, which is 192 KiB on trn1 (the
# smallest), 224 KiB on trn2 and 256 KiB on trn3 (reference/nki.md §1.1), leaving headroom on every target.
MAX_COLUMNS = 8192
# The engines compute softmax's exp and reciprocal in floating point only; an integer "softmax" would round every
# probability to 0 or 1, so other dtypes are refused rather than run (and published) as nonsense.
DTYPES = ("float32", "bfloat16", "float16")


def plan_softmax(x):
    if len(x.shape) != 2:
        raise ValueError(f"softmax takes a 2-D array (rows, columns), got shape {tuple(x.shape)}")
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"softmax: at most {MAX_COLUMNS} columns per row, got {x.shape[1]}")
    if np.dtype(x.dtype).name not in DTYPES:
        raise ValueError(f"softmax: dtype {x.dtype} is not supported; it takes {', '.join(DTYPES)} (exp and the "
                         f"normalisation are floating-point)")  # fmt: skip
    if _static(x.shape[1]) is None:  # a shape family over the row length (kernel.toml): tiles sized for its top
        return softmax_widths, (x,), {}
    return softmax_kernel, (x,), {}


def _static(n):
    """``n`` as an int, or None for a shape family's symbolic dimension."""
    try:
        return operator.index(n)
    except nki.InconclusiveDimensionError:
        return None


def softmax(x, *, backend: str | None = None):
    """Softmax along the last axis of a 2-D array."""
    launch, args, kwargs = plan_softmax(x)
    return launch(*args, backend=backend, **kwargs)
