"""The softmax kernel: rows on partitions (tiles of 128), the reduction along the free axis; the ragged last
row tile carries a mask on every op so rows past the end are never read or written."""

import math

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def softmax_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = x.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(num_cols)[None, :]
    for t in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = t * nl.tile_size.pmax + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < num_rows))
        # Subtracting the row maximum keeps exp in range for large logits (fp16 overflows at 65504).
        row_max = nl.max(tile, axis=[1], keepdims=True, mask=(rows < num_rows))
        e = nl.exp(nl.subtract(tile, row_max, mask=(rows < num_rows)), mask=(rows < num_rows))
        row_sum = nl.sum(e, axis=[1], keepdims=True, mask=(rows < num_rows))
        y = nl.multiply(e, nl.reciprocal(row_sum), dtype=x.dtype, mask=(rows < num_rows))
        nl.store(out[rows, i_f], value=y, mask=(rows < num_rows))
    return out
