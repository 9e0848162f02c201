"""A mask can switch an op off for a whole iteration; its result still exists (as poison) for later ops."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def exp_rows_last_tile_first(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range(2):
        i_p = (1 - t) * 128 + nl.arange(128)[:, None]  # iteration 0 visits rows 128..255: none exist
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        e = nl.exp(tile)  # unmasked: computes on poison in the empty iteration, never stored
        nl.store(out[i_p, i_f], value=e, mask=(i_p < rows))
    return out


def test_an_iteration_the_mask_empties_still_defines_the_tile():
    x = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
    np.testing.assert_allclose(exp_rows_last_tile_first(x), np.exp(x), rtol=1e-6)


@nki.jit
def exp_rows_unrolled_last_tile_first(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.static_range(2):  # unrolled: each iteration's window is known when the kernel is traced
        i_p = (1 - t) * 128 + nl.arange(128)[:, None]  # iteration 0's window, rows 128..255, lies wholly past x
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        nl.store(out[i_p, i_f], value=nl.exp(tile), mask=(i_p < rows))
    return out


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_masked_load_of_a_window_wholly_outside_its_tensor_defines_the_tile(backend):
    # The JAX backend reads a window known at trace time as a slice; one with no element inside the tensor has no
    # slice to take, and must still give a tile of the access's shape (every lane masked off) for the ops after it.
    x = np.random.default_rng(1).standard_normal((100, 8)).astype(np.float32)
    np.testing.assert_allclose(exp_rows_unrolled_last_tile_first(x, backend=backend), np.exp(x), rtol=1e-6)
