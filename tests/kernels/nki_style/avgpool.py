"""2-D average pooling, in the style of the legacy NKI avgpool tutorial: channels on partitions and a 5-D
access pattern ``in_tile[i0, pool*i1 + i2, pool*i3 + i4]`` whose window axes 2 and 4 are summed.

* ``tensor_avgpool_kernel``: the tutorial kernel (``C <= 128``), with ``nki.typing`` annotations.
* ``tensor_avgpool_tiled``: any number of channels: channel tiles of 128 with a mask on the last one, and a
  pool size that need not divide the image (the trailing rows and columns are dropped, as in floor mode).
"""

import math

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.typing import tensor


@nki.jit
def tensor_avgpool_kernel(in_tensor, pool_size):
    sz_cin, sz_hin, sz_win = in_tensor.shape
    sz_hout = sz_hin // pool_size
    sz_wout = sz_win // pool_size
    out_tensor = nl.ndarray((sz_cin, sz_hout, sz_wout), dtype=in_tensor.dtype, buffer=nl.shared_hbm)

    sz_p = sz_cin
    sz_pool = pool_size

    # Two extra index dimensions address the inside of a pooling window.
    i0, i1, i2, i3, i4 = nl.mgrid[0:sz_p, 0:sz_hin // sz_pool, 0:sz_pool, 0:sz_win // sz_pool, 0:sz_pool]

    in_tile: tensor[sz_p, sz_hin, sz_win] = nl.load(in_tensor)
    out_tile: tensor[sz_p, sz_hout, sz_wout] = nl.sum(in_tile[i0, sz_pool * i1 + i2, sz_pool * i3 + i4],
                                                      axis=[2, 4]) / (pool_size * pool_size)
    nl.store(out_tensor, value=out_tile)
    return out_tensor


@nki.jit
def tensor_avgpool_tiled(in_tensor, pool_size):
    sz_cin, sz_hin, sz_win = in_tensor.shape
    sz_hout = sz_hin // pool_size
    sz_wout = sz_win // pool_size
    out_tensor = nl.ndarray((sz_cin, sz_hout, sz_wout), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    sz_p = nl.tile_size.pmax

    i_p = nl.arange(sz_p)[:, None, None]
    i_h = nl.arange(sz_hin)[None, :, None]
    i_w = nl.arange(sz_win)[None, None, :]
    i0, i1, i2, i3, i4 = nl.mgrid[0:sz_p, 0:sz_hout, 0:pool_size, 0:sz_wout, 0:pool_size]
    o_p = nl.arange(sz_p)[:, None, None]
    o_h = nl.arange(sz_hout)[None, :, None]
    o_w = nl.arange(sz_wout)[None, None, :]

    for c in nl.affine_range(math.ceil(sz_cin / sz_p)):
        in_tile = nl.load(in_tensor[c * sz_p + i_p, i_h, i_w], mask=(c * sz_p + i_p < sz_cin))
        window_sum = nl.sum(in_tile[i0, pool_size * i1 + i2, pool_size * i3 + i4], axis=[2, 4],
                            mask=(c * sz_p + i0 < sz_cin))
        out_tile = nl.multiply(window_sum, 1.0 / (pool_size * pool_size), dtype=in_tensor.dtype)
        nl.store(out_tensor[c * sz_p + o_p, o_h, o_w], value=out_tile, mask=(c * sz_p + o_p < sz_cin))
    return out_tensor
