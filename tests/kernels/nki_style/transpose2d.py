"""Transposes, in the style of the legacy NKI transpose2d tutorial.

* ``tensor_transpose2D_kernel_``: every row of the input holds a row-major ``(sz_f1, sz_f2)`` matrix; the kernel
  transposes each one in SBUF with an access pattern on both sides of a copy (the F1/F2 transpose).
* ``transpose_tiled_kernel``: a [M, N] matrix transposed with ``nl.transpose`` (the PF transpose) in 128x128
  tiles, masked on ragged edges.
* ``transpose_load_kernel``: the same with ``nl.load_transpose2d`` (a DMA transpose).
* ``transpose_isa_kernel``: ``nisa.nc_transpose`` on the Tensor engine.
"""

import math

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def tensor_transpose2D_kernel_(in_tensor, shape2D):
    out_tensor = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    sz_p, _ = in_tensor.shape
    in_tile = nl.load(in_tensor)

    sz_f1, sz_f2 = shape2D
    # i_p0 is the partition index; i_f1 and i_f2 address the matrix each partition holds.
    i_p0 = nl.arange(sz_p)[:, None, None]
    i_f1 = nl.arange(sz_f1)[None, :, None]
    i_f2 = nl.arange(sz_f2)[None, None, :]

    out_tile = nl.ndarray(shape=(sz_p, sz_f2 * sz_f1), dtype=out_tensor.dtype)
    out_tile[i_p0, i_f2 * sz_f1 + i_f1] = nl.copy(in_tile[i_p0, i_f1 * sz_f2 + i_f2])

    nl.store(out_tensor, value=out_tile)
    return out_tensor


@nki.jit
def transpose_tiled_kernel(in_tensor):
    M, N = in_tensor.shape
    out_tensor = nl.ndarray((N, M), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:128]
    for m in nl.affine_range(math.ceil(M / 128)):
        for n in nl.affine_range(math.ceil(N / 128)):
            inside = (m * 128 + ip < M) & (n * 128 + jf < N)
            tile = nl.load(in_tensor[m * 128 + ip, n * 128 + jf], mask=inside)
            tile_t = nl.transpose(tile)
            nl.store(out_tensor[n * 128 + ip, m * 128 + jf], value=tile_t,
                     mask=(n * 128 + ip < N) & (m * 128 + jf < M))
    return out_tensor


@nki.jit
def transpose_load_kernel(in_tensor):
    M, N = in_tensor.shape
    out_tensor = nl.ndarray((N, M), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:128]
    for m in nl.affine_range(math.ceil(M / 128)):
        for n in nl.affine_range(math.ceil(N / 128)):
            tile_t = nl.load_transpose2d(in_tensor[m * 128 + ip, n * 128 + jf],
                                         mask=(m * 128 + ip < M) & (n * 128 + jf < N))
            nl.store(out_tensor[n * 128 + ip, m * 128 + jf], value=tile_t,
                     mask=(n * 128 + ip < N) & (m * 128 + jf < M))
    return out_tensor


@nki.jit
def transpose_isa_kernel(in_tensor):
    M, N = in_tensor.shape
    assert M % 128 == 0 and N % 128 == 0
    out_tensor = nl.ndarray((N, M), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 128):
            tile = nl.load(in_tensor[m * 128:(m + 1) * 128, n * 128:(n + 1) * 128])
            tile_t = nisa.nc_transpose(tile)
            nl.store(out_tensor[n * 128:(n + 1) * 128, m * 128:(m + 1) * 128],
                     value=nl.copy(tile_t, dtype=in_tensor.dtype))
    return out_tensor
