"""Tensor addition, in the style of the legacy NKI getting-started and SPMD tutorials.

Only the import lines differ from a ``neuronxcc.nki`` kernel.
"""

import math

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def nki_tensor_add_kernel(a_input, b_input):
    """One tile: both inputs fit on the 128 partitions."""
    assert a_input.shape == b_input.shape
    assert a_input.shape[0] <= nl.tile_size.pmax

    a_tile = nl.load(a_input)
    b_tile = nl.load(b_input)
    c_tile = nl.add(a_tile, b_tile)

    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, value=c_tile)
    return c_output


@nki.jit
def nki_tensor_add_kernel_(a_input, b_input):
    """One [128, 512] tile per SPMD program; the grid covers the whole tensor."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

    offset_i_x = nl.program_id(0) * 128
    offset_i_y = nl.program_id(1) * 512

    ix = offset_i_x + nl.arange(128)[:, None]
    iy = offset_i_y + nl.arange(512)[None, :]

    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile

    nl.store(c_output[ix, iy], value=c_tile)
    return c_output


def nki_tensor_add(a_input, b_input):
    """Launch one program per [128, 512] tile."""
    grid_x = a_input.shape[0] // 128
    grid_y = a_input.shape[1] // 512
    return nki_tensor_add_kernel_[grid_x, grid_y](a_input, b_input)


def nki_tensor_add_nc2(a_input, b_input):
    """The same kernel with the first grid axis spread over two NeuronCores."""
    grid_x = a_input.shape[0] // (128 * 2)
    grid_y = a_input.shape[1] // 512
    return nki_tensor_add_kernel_[nl.nc(2) * grid_x, grid_y](a_input, b_input)


@nki.jit
def nki_tensor_add_ragged(a_input, b_input):
    """Any 2-D shape: tiles of [128, 512] with masks on the ragged edges."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    sz_p, sz_f = a_input.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(512)[None, :]
    for p in nl.affine_range(math.ceil(sz_p / nl.tile_size.pmax)):
        for f in nl.affine_range(math.ceil(sz_f / 512)):
            rows = p * nl.tile_size.pmax + i_p
            cols = f * 512 + i_f
            inside = (rows < sz_p) & (cols < sz_f)
            a_tile = nl.load(a_input[rows, cols], mask=inside)
            b_tile = nl.load(b_input[rows, cols], mask=inside)
            c_tile = nl.add(a_tile, b_tile, mask=inside)
            nl.store(c_output[rows, cols], value=c_tile, mask=inside)
    return c_output
