"""The user-facing softmax: checks the input, picks the launch (one instance; the kernel loops over row tiles
itself) and runs it.

``plan_softmax`` is what the Hub bundle builder traces for each declared specialisation; it passes the caller's
arrays to the kernel unchanged and in order, so a loader without this Python can match a call to the published IR.
"""

from .kernel import softmax_kernel

# One row tile of fp32 per partition: 8192 x 4 B = 32 KiB of a partition's SBUF, which is 192 KiB on trn1 (the
# smallest), 224 KiB on trn2 and 256 KiB on trn3 (reference/nki.md §1.1), leaving headroom on every target.
MAX_COLUMNS = 8192


def plan_softmax(x):
    if len(x.shape) != 2:
        raise ValueError(f"softmax takes a 2-D array (rows, columns), got shape {tuple(x.shape)}")
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"softmax: at most {MAX_COLUMNS} columns per row, got {x.shape[1]}")
    return softmax_kernel, (x,), {}


def softmax(x, *, backend: str = "numpy"):
    """Softmax along the last axis of a 2-D array."""
    launch, args, kwargs = plan_softmax(x)
    return launch(*args, backend=backend, **kwargs)
