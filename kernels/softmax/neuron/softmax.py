"""Row softmax along the free axis, against AWS's current ``nki`` API (destination-passing ``nisa`` ops).

The same algorithm as ``../kernel.py``: rows on partitions in tiles of ``pmax`` (128), the last tile ragged. In the
current API a Python ``range`` over row tiles is unrolled when the kernel is specialised to the input's shape, so
the ragged tile is a plain partition slice ``[0:rows]`` instead of a mask.
"""

import nki
import nki.isa as nisa
import nki.language as nl

MAX_COLUMNS = 8192  # the row tile, its exponentials and the result in SBUF: 3 x 32 KiB of fp32 per partition


@nki.jit
def softmax_kernel(x):
    num_rows, num_cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for start in range(0, num_rows, pmax):
        rows = min(pmax, num_rows - start)
        tile = nl.ndarray((pmax, num_cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows, :], src=x[start : start + rows, :])
        # Subtracting the row maximum keeps exp in range for large logits (fp16 overflows at 65504): the reduction
        # writes -max, which is the bias of the exponential.
        neg_max = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:rows, :], op=nl.maximum, data=tile[0:rows, :], axis=1, negate=True,
                           keepdims=True)  # fmt: skip
        e = nl.ndarray((pmax, num_cols), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:rows, :], op=nl.exp, data=tile[0:rows, :], reduce_op=nl.add,
                               reduce_res=row_sum[0:rows, :], bias=neg_max[0:rows, :], scale=1.0)  # fmt: skip
        inv_sum = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum[0:rows, :], data=row_sum[0:rows, :])
        y = nl.ndarray((pmax, num_cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows, :], data=e[0:rows, :], op0=nl.multiply, operand0=inv_sum[0:rows, :])
        nisa.dma_copy(dst=out[start : start + rows, :], src=y[0:rows, :])
    return out


def softmax(x):
    """Softmax along the last axis of a 2-D tensor (at most MAX_COLUMNS columns)."""
    if len(x.shape) != 2:
        raise ValueError(f"softmax takes a 2-D tensor (rows, columns), got shape {tuple(x.shape)}")
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"softmax: at most {MAX_COLUMNS} columns per row, got {x.shape[1]}")
    return softmax_kernel(x)
