"""RMSNorm, in the style of the legacy NKI rmsnorm tutorial: ``out = a / sqrt(mean(a^2)) * g`` along rows. The
``nl.rms_norm`` version is the library's (``kernels/rmsnorm``).

* ``nki_rmsnorm_kernel``: the tutorial's structure (1-row weight tile broadcast across partitions, reduction
  without keepdims, masks on the ragged last tile, in-place ``out_tile[...] = ...``).
* ``nki_rmsnorm_isa``: ``nisa.activation`` squares and reduces in one instruction, ``nisa.tensor_scalar``
  scales by the per-row factor.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def nki_rmsnorm_kernel(a_tensor, g_tensor):
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    assert a_tensor.shape[1] == g_tensor.shape[0]

    ix = nl.arange(128)[:, None]
    iw = nl.arange(1)[:, None]
    iy = nl.arange(a_tensor.shape[1])[None, :]
    num_rows = a_tensor.shape[0]

    # The weight is loaded once and reused by every row tile.
    g_tile = nl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])

    for i in nl.affine_range(math.ceil(a_tensor.shape[0] / 128)):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        in_square = nl.square(a_tile)
        square_sum = nl.sum(in_square, axis=[1])
        mean = square_sum / a_tensor.shape[1]
        rms_reciprocal = nl.rsqrt(mean)
        out_tile = nl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
        out_tile[...] = nl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        nl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor


@nki.jit
def nki_rmsnorm_isa(a_tensor, g_tensor):
    out_tensor = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, n = a_tensor.shape
    ix = nl.arange(128)[:, None]
    iy = nl.arange(n)[None, :]
    g_bcast = nl.load(g_tensor.reshape((1, n))).broadcast_to((128, n))
    for i in nl.affine_range(math.ceil(num_rows / 128)):
        rows = i * 128 + ix
        a_tile = nl.load(a_tensor[rows, iy], mask=(rows < num_rows))
        sq_sum = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.activation(op=np.square, data=a_tile, reduce_op=np.add, reduce_res=sq_sum, mask=(rows < num_rows))
        rms_reciprocal = nisa.activation(op=nl.rsqrt, data=sq_sum, scale=1.0 / n, mask=(rows < num_rows))
        scaled = nisa.tensor_scalar(a_tile, np.multiply, rms_reciprocal, mask=(rows < num_rows))
        out_tile = nisa.tensor_tensor(scaled, g_bcast, op=np.multiply, dtype=a_tensor.dtype,
                                      mask=(rows < num_rows))
        nl.store(out_tensor[rows, iy], value=out_tile, mask=(rows < num_rows))
    return out_tensor
