"""A mask that ties two index axes (``128*u + p < rows``) cannot be cut to a box, so the masked-off elements of a
3-D view of a 2-D tensor still index rows past its end. The verifier bounds only the kept elements; the NumPy
reference (and the simulator, which computes with it) must then neither read past the end nor let a masked-off
element's write land anywhere. Before, both raised IndexError while JAX ran the kernel."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl

BACKENDS = ["numpy", "simulator", "jax"]


def _run(kernel, backend, *args):
    if backend == "simulator":
        return np.asarray(nki.simulate(kernel, *args)[0])
    return np.asarray(kernel(*args, backend=backend))


@nki.jit
def copy_rows_as_blocks(x):
    """Rows 128*u + p of x, three blocks per tile: the last block is ragged when rows < 384."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None, None]
    i_u = nl.arange(3)[None, :, None]
    i_f = nl.arange(cols)[None, None, :]
    t = nl.load(x[128 * i_u + i_p, i_f], mask=(128 * i_u + i_p < rows))
    nl.store(out[128 * i_u + i_p, i_f], value=nl.multiply(t, 2.0), mask=(128 * i_u + i_p < rows))
    return out


@nki.jit
def scaled_rows_in_a_loop(x):
    """The same tie with a loop index in the row: blocks of 256 rows, each as 2 x 128."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None, None]
    i_u = nl.arange(2)[None, :, None]
    i_f = nl.arange(cols)[None, None, :]
    for b in nl.affine_range((rows + 255) // 256):
        row = 256 * b + 128 * i_u + i_p
        t = nl.load(x[row, i_f], mask=(row < rows))
        nl.store(out[row, i_f], value=nl.add(t, 1.0), mask=(row < rows))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [300, 257, 384])
def test_a_mask_tying_two_axes_reads_and_writes_only_the_kept_rows(backend, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 16)).astype(np.float32)
    # row rows-1 is the last kept row: masked-off rows clipped onto it must not overwrite it
    np.testing.assert_array_equal(_run(copy_rows_as_blocks, backend, x), x * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mask_tying_two_axes_with_a_loop_index_keeps_the_tail(backend):
    x = np.random.default_rng(1).standard_normal((600, 8)).astype(np.float32)
    np.testing.assert_array_equal(_run(scaled_rows_in_a_loop, backend, x), x + 1)
