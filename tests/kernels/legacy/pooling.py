"""Pooling kernels in the style of AWS's reference set (channels on partitions, one image per launch).

* ``adaptive_avg_pool2d_kernel``: PyTorch's adaptive average pooling to ``output_size``: output cell ``(i, j)``
  averages rows ``floor(i*H/OH) .. ceil((i+1)*H/OH) - 1`` and the matching columns, so bins may differ in size
  and overlap. The bins are compile-time constants: each output cell is one reduction over its window.
* ``select_and_scatter_kernel``: the backward of max pooling (XLA's SelectAndScatter): each window's gradient
  goes to the window's first maximum of the forward input, and gradients of overlapping windows add up.
"""

import math

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def adaptive_avg_pool2d_kernel(in_tensor, output_size):
    c_in, h_in, w_in = in_tensor.shape
    h_out, w_out = output_size
    out_tensor = nl.ndarray((c_in, h_out, w_out), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    i_p = nl.arange(pmax)[:, None, None]
    i_h, i_w = nl.arange(h_in)[None, :, None], nl.arange(w_in)[None, None, :]
    o_h, o_w = nl.arange(h_out)[None, :, None], nl.arange(w_out)[None, None, :]
    for c in nl.affine_range(math.ceil(c_in / pmax)):
        valid = c * pmax + i_p < c_in
        x = nl.load(in_tensor[c * pmax + i_p, i_h, i_w], mask=valid)
        pooled = nl.ndarray((pmax, h_out, w_out), dtype=nl.float32, buffer=nl.sbuf)
        for oh in nl.static_range(h_out):
            h0, h1 = (oh * h_in) // h_out, -((-(oh + 1) * h_in) // h_out)
            for ow in nl.static_range(w_out):
                w0, w1 = (ow * w_in) // w_out, -((-(ow + 1) * w_in) // w_out)
                window = nl.sum(x[:, h0:h1, w0:w1], axis=[1, 2], keepdims=True, mask=valid)
                pooled[:, oh:oh + 1, ow:ow + 1] = nl.multiply(window, 1.0 / ((h1 - h0) * (w1 - w0)), mask=valid)
        nl.store(out_tensor[c * pmax + i_p, o_h, o_w], value=pooled, mask=valid)
    return out_tensor


@nki.jit
def select_and_scatter_kernel(operand, source, window, stride):
    """``operand`` [C, H, W] (the max-pool input), ``source`` [C, OH, OW] (the gradient of its output) ->
    [C, H, W]: each window's ``source`` value added at the window's first maximum (row-major order)."""
    c_in, h_in, w_in = operand.shape
    _, h_out, w_out = source.shape
    out_tensor = nl.ndarray(operand.shape, dtype=operand.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    i_p = nl.arange(pmax)[:, None, None]
    i_h, i_w = nl.arange(h_in)[None, :, None], nl.arange(w_in)[None, None, :]
    o_h, o_w = nl.arange(h_out)[None, :, None], nl.arange(w_out)[None, None, :]
    for c in nl.affine_range(math.ceil(c_in / pmax)):
        valid = c * pmax + i_p < c_in
        x = nl.load(operand[c * pmax + i_p, i_h, i_w], mask=valid)
        g = nl.load(source[c * pmax + i_p, o_h, o_w], mask=valid)
        # the window maximum at every output position: a max over the window's strided views
        best = nl.full((pmax, h_out, w_out), -math.inf, dtype=nl.float32)
        for kh in nl.static_range(window):
            for kw in nl.static_range(window):
                best[...] = nl.maximum(best, x[i_p, stride * o_h + kh, stride * o_w + kw], mask=valid)
        # select: the first offset (row-major) holding the maximum takes the gradient; scatter: add it there
        grad = nl.zeros((pmax, h_in, w_in), dtype=nl.float32)
        taken = nl.zeros((pmax, h_out, w_out), dtype=nl.float32)
        for kh in nl.static_range(window):
            for kw in nl.static_range(window):
                hit = nl.multiply(nl.equal(x[i_p, stride * o_h + kh, stride * o_w + kw], best, dtype=nl.float32),
                                  nl.subtract(1.0, taken), mask=valid)
                taken[...] = nl.add(taken, hit, mask=valid)
                grad[i_p, stride * o_h + kh, stride * o_w + kw] += nl.multiply(hit, g, mask=valid)
        nl.store(out_tensor[c * pmax + i_p, i_h, i_w], value=grad, mask=valid)
    return out_tensor
