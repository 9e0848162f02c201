"""Softmax for a shape family whose row length W is a symbol (``nki.spec(dims=)``), as ``launcher.plan_softmax``
dispatches it: the numbers of ``kernel.softmax_kernel``'s concrete trace at every instance, bit for bit
(tests/kernels/test_norm_width_families.py).

The concrete kernel sizes its tiles by the row length (``nl.arange(num_cols)``), which cannot be traced with W
symbolic (an on-chip shape needs a concrete length). So a width family runs the same instructions on tiles sized
for the top of its range (``top``), every instruction masked to the rows below N and the columns below W: the max
and the sum reduce only the columns the mask keeps (their ``reduce_mask``), the masked elements are never
computed or stored. The families of a dtype cover every width the launcher takes (``MAX_COLUMNS``), split
where two row tiles' tensors stop fitting a partition's SBUF (``width_boxes``), so that below that width one tile's
load overlaps the previous tile's compute as in the concrete trace (modelled 1.02-1.05x slower without the split at
256-4096 x 512-1000 fp32, 1.00x with it).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

SBUF_PARTITION_BYTES = 224 * 1024  # a trn2 partition's SBUF (reference/nki.md §1.2 table), the Hub's target


def width_boxes(dtype: str, max_columns: int) -> list[tuple[int, int]]:
    """The W ranges of a dtype's families: up to the largest power of two whose row tile's four tensors ([128, W]
    in the dtype: x, x - max, exp, the result) fit SBUF twice, then the rest."""
    per_column = 4 * np.dtype(nl.bfloat16 if dtype == "bfloat16" else dtype).itemsize
    double = 1 << int(math.log2(SBUF_PARTITION_BYTES // (2 * per_column)))
    return [(1, max_columns)] if double >= max_columns else [(1, double), (double + 1, max_columns)]


def top(n) -> int:
    """The largest value of a dimension over the family (an int is its own)."""
    return n if isinstance(n, int) else n.table.bounds(n.expr)[1]


@nki.jit
def softmax_widths(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = x.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(top(num_cols))[None, :]
    for t in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = t * nl.tile_size.pmax + i_p
        ok = (rows < num_rows) & (i_f < num_cols)
        tile = nl.load(x[rows, i_f], mask=ok)
        row_max = nl.max(tile, axis=[1], keepdims=True, mask=ok)  # over the columns below W only
        e = nl.exp(nl.subtract(tile, row_max, mask=ok), mask=ok)
        row_sum = nl.sum(e, axis=[1], keepdims=True, mask=ok)
        y = nl.multiply(e, nl.reciprocal(row_sum), dtype=x.dtype, mask=ok)
        nl.store(out[rows, i_f], value=y, mask=ok)
    return out
