"""Softmax for a shape family whose row length W is a symbol (``nki.spec(dims=)``), as ``launcher.plan_softmax``
dispatches it: the numbers of ``kernel.softmax_kernel``'s concrete trace at every instance, bit for bit
(tests/kernels/test_norm_width_families.py).

The concrete kernel sizes its tiles by the row length (``nl.arange(num_cols)``), which cannot be traced with W
symbolic (an on-chip shape needs a concrete length). So a width family runs the same instructions on tiles sized
for the top of its range (``top``), every instruction masked to the rows below N and the columns below W: the max
and the sum reduce only the columns the mask keeps (their ``reduce_mask``), the masked elements are never
computed or stored. One family per dtype covers every width the launcher takes (``MAX_COLUMNS``): its four
row-tile-sized tensors fit a partition's SBUF at the top (``kernel.toml``).
"""

import math

import nki_dsl as nki
import nki_dsl.language as nl


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
