"""Nearest-neighbour resize of an NHWC image batch, in the style of AWS's ``resize_nearest_fixed_dma_kernel``:
output pixel ``(oh, ow)`` copies input pixel ``(floor(oh * H / OH), floor(ow * W / OW))`` (PyTorch's ``nearest``).

* ``resize_nearest_fixed_dma_kernel``: the source of each output pixel is computed on the host (NumPy) and the
  kernel issues one DMA per output pixel with those constant addresses, as the reference kernel does.
* ``resize_nearest_gather_dma_kernel``: the sources are computed on chip, 128 output pixels at a time (an
  ``iota`` of the pixel numbers, then float arithmetic exact on these small integers), into an int32 index tile
  that a gather DMA (``nl.load(rows[b, idx, :], mask=...)``) reads the input rows with: one DMA per 128 pixels, the
  last tile's partitions past the image masked off (their indices, past the input, are not checked).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def resize_nearest_fixed_dma_kernel(data_tensor, out_shape):
    in_b, in_h, in_w, in_c = data_tensor.shape
    out_b, out_h, out_w, out_c = out_shape
    out_tensor = nl.ndarray(out_shape, dtype=data_tensor.dtype, buffer=nl.shared_hbm)
    h_map = (np.arange(out_h)[:, None] * in_h) // out_h
    w_map = (np.arange(out_w)[None, :] * in_w) // out_w
    src_map = (h_map * in_w + w_map).astype(np.int32).flatten()
    data_tile = data_tensor.reshape((in_b, in_h * in_w, in_c))
    out_tile = out_tensor.reshape((out_b, out_h * out_w, out_c))
    b_map = nl.arange(in_b)[:, None]
    c_map = nl.arange(in_c)[None, :]
    for i in nl.static_range(out_h * out_w):
        local_data = nl.load(data_tile[b_map, src_map[i], c_map])
        nl.store(out_tile[b_map, i, c_map], value=local_data)
    return out_tensor


@nki.jit
def resize_nearest_gather_dma_kernel(data_tensor, out_shape):
    in_b, in_h, in_w, in_c = data_tensor.shape
    out_b, out_h, out_w, out_c = out_shape
    out_tensor = nl.ndarray(out_shape, dtype=data_tensor.dtype, buffer=nl.shared_hbm)
    data_rows = data_tensor.reshape((in_b, in_h * in_w, in_c))
    out_rows = out_tensor.reshape((out_b, out_h * out_w, out_c))
    pmax = nl.tile_size.pmax
    n_out = out_h * out_w
    i_p = nl.arange(pmax)[:, None]
    for t in nl.affine_range(math.ceil(n_out / pmax)):
        pixel = nisa.iota(t * pmax + i_p, dtype=nl.float32)  # the output pixel each partition moves
        # oh = floor(pixel / out_w), ow = pixel - oh * out_w; the + 0.5 keeps floor off an exact integer edge
        oh = nl.floor(nl.divide(nl.add(pixel, 0.5), out_w))
        ow = nl.subtract(pixel, nl.multiply(oh, out_w))
        ih = nl.floor(nl.divide(nl.add(nl.multiply(oh, in_h), 0.5), out_h))
        iw = nl.floor(nl.divide(nl.add(nl.multiply(ow, in_w), 0.5), out_w))
        idx = nl.copy(nl.add(nl.multiply(ih, in_w), iw), dtype=nl.int32)
        in_image = t * pmax + i_p < n_out  # a ragged last tile: partitions past the last pixel move nothing
        for b in nl.affine_range(in_b):
            rows = nl.load(data_rows[b, idx, :], mask=in_image)
            nl.store(out_rows[b, nl.ds(t * pmax, pmax), :], value=rows, mask=in_image)
    return out_tensor
