"""Row softmax, in the style of the legacy NKI tutorials: rows on partitions, the reduction along the free axis.

* ``softmax_builtin_kernel``: rows tiled by 128 with a mask on the ragged last tile, as the library's
  ``kernels/softmax`` (max, exp, sum and a reciprocal), but with ``nl.softmax``.
* ``softmax_online_kernel``: rows too long for one tile; column blocks in a ``sequential_range`` keep a running
  max and a running sum in SBUF (the online-softmax recurrence), then a second pass normalises.
* ``softmax_isa_kernel``: ``nisa.tensor_reduce`` and ``nisa.activation`` with a per-partition bias.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def softmax_builtin_kernel(in_tensor):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = in_tensor.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(num_cols)[None, :]
    for i in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = i * nl.tile_size.pmax + i_p
        x = nl.load(in_tensor[rows, i_f], mask=(rows < num_rows))
        y = nl.softmax(x, axis=1, mask=(rows < num_rows))
        nl.store(out_tensor[rows, i_f], value=y, mask=(rows < num_rows))
    return out_tensor


@nki.jit
def softmax_online_kernel(in_tensor, block=512):
    """Columns in blocks of ``block``; the number of columns must be a multiple of it."""
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = in_tensor.shape
    assert num_cols % block == 0
    n_blocks = num_cols // block
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(block)[None, :]
    i_one = nl.arange(1)[None, :]
    for i in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = i * nl.tile_size.pmax + i_p
        running_max = nl.full((nl.tile_size.pmax, 1), -np.inf, dtype=nl.float32)
        running_sum = nl.zeros((nl.tile_size.pmax, 1), dtype=nl.float32)
        for b in nl.sequential_range(n_blocks):
            x = nl.load(in_tensor[rows, b * block + i_f], mask=(rows < num_rows), dtype=nl.float32)
            new_max = nl.maximum(running_max, nl.max(x, axis=1, keepdims=True))
            # rescale the sum so far to the new max, then add this block's contribution
            correction = nl.exp(running_max - new_max)
            block_sum = nl.sum(nl.exp(x - new_max), axis=1, keepdims=True)
            running_sum[i_p, i_one] = running_sum * correction + block_sum
            running_max[i_p, i_one] = nl.copy(new_max)
        inv_sum = nl.reciprocal(running_sum)
        for b in nl.affine_range(n_blocks):
            x = nl.load(in_tensor[rows, b * block + i_f], mask=(rows < num_rows), dtype=nl.float32)
            y = nl.exp(x - running_max) * inv_sum
            nl.store(out_tensor[rows, b * block + i_f], value=y, mask=(rows < num_rows))
    return out_tensor


@nki.jit
def softmax_isa_kernel(in_tensor):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, num_cols = in_tensor.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(num_cols)[None, :]
    for i in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = i * nl.tile_size.pmax + i_p
        x = nl.load(in_tensor[rows, i_f], mask=(rows < num_rows))
        neg_max = nisa.tensor_reduce(np.max, data=x, axis=(1,), negate=True, keepdims=True,
                                     mask=(rows < num_rows))
        e = nisa.activation(op=nl.exp, data=x, bias=neg_max, scale=1.0, mask=(rows < num_rows),
                            dtype=nl.float32)
        total = nisa.tensor_reduce(np.add, data=e, axis=(1,), keepdims=True, mask=(rows < num_rows))
        inv = nisa.reciprocal(total, mask=(rows < num_rows))
        y = nisa.tensor_scalar(e, np.multiply, inv, dtype=in_tensor.dtype, mask=(rows < num_rows))
        nl.store(out_tensor[rows, i_f], value=y, mask=(rows < num_rows))
    return out_tensor
