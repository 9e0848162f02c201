"""How a mesh run splits HBM tensors (``backends/jax/sharding.layouts``), decided from the IR alone: no devices
needed (the mesh runs themselves are ``test_mesh.py``'s, in a fresh interpreter)."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.jax.analysis import analyse
from nki_dsl.backends.jax.sharding import layouts


@nki.jit
def diagonal_blocks(x):
    """Program p copies the p-th diagonal block: both dimensions follow program_id(0) in blocks of 128."""
    out = nl.ndarray((256, 256), dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    i_p, i_f = nl.mgrid[0:128, 0:128]
    nl.store(out[p * 128 + i_p, p * 128 + i_f], value=nl.load(x[p * 128 + i_p, p * 128 + i_f]))
    return out


def test_a_grid_axis_splits_one_dimension_of_a_tensor_even_when_two_follow_it():
    # a mesh axis can shard one dimension of an array: the first dimension that follows the grid axis takes it
    ir = nki.trace(diagonal_blocks[2], np.zeros((256, 256), np.float32)).ir
    layout = layouts(analyse(ir), (0,))
    assert layout["x"] == layout[ir.outputs[0].name] == ((0, 128), None), layout
