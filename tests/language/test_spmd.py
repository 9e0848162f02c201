"""SPMD launch grids: ``program_id``, ``num_programs``, ``program_ndim``, ``nl.nc`` / ``nl.spmd_dim`` grids."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import F32, rand


@nki.jit
def tile_grid_kernel(a, b):
    """(M, K) @ (K, N) with one [128, 256] output tile per program, as in the legacy SPMD matmul example."""
    m, n = a.shape[1], b.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    i0, i1 = nl.program_id(0) * 128, nl.program_id(axis=1) * 256
    lhs = nl.load(a[:, nl.ds(i0, 128)])
    rhs = nl.load(b[:, nl.ds(i1, 256)])
    nl.store(out[nl.ds(i0, 128), nl.ds(i1, 256)], value=nl.matmul(lhs, rhs, transpose_x=True))
    return out


@pytest.mark.parametrize("grid", [(2, 3), (1, 1)])
def test_program_ids_select_tiles(grid):
    a, b = rand((128, 128 * grid[0]), F32, seed=1), rand((128, 256 * grid[1]), F32, seed=2)
    got = tile_grid_kernel[grid](a, b)
    np.testing.assert_allclose(got, a.T.astype(np.float64) @ b, rtol=0, atol=128 * 2.0**-23 * 128)


@nki.jit
def grid_query_kernel(x):
    """Each program writes its grid facts into its own [128, 4] slab of a [P0 * P1 * 128, 4] output."""
    out = nl.ndarray((nl.num_programs() * 128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    ones = nl.load(x)
    facts = [nl.num_programs(0), nl.num_programs(axes=1), nl.num_programs((0, 1)), nl.program_ndim()]
    flat = nl.program_id(0) * nl.num_programs(1) + nl.program_id(1)
    for j in nl.static_range(4):
        nl.store(out[nl.ds(flat * 128, 128), nl.ds(j, 1)], value=ones * facts[j])
    return out


@pytest.mark.parametrize("grid", [(2, 3), (nl.spmd_dim(nl.nc(2), 2), 1)], ids=["2x3", "spmd_dim(nc(2),2)x1"])
def test_grid_queries(grid):
    got = grid_query_kernel[grid](np.ones((128, 1), F32))
    p0, p1 = (4, 1) if grid[0] == 4 else grid
    np.testing.assert_array_equal(got, np.tile([p0, p1, p0 * p1, 2], (p0 * p1 * 128, 1)))


@nki.jit
def pid_data_kernel(x):
    """A program id in an index expression of a 1-D grid: each program scales its own row block."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    cols = nl.arange(x.shape[1])[None, :]
    nl.store(out[rows, cols], value=nl.load(x[rows, cols]) * float(nl.program_ndim()))
    return out


def test_one_dimensional_grid():
    x = rand((512, 16), F32, seed=3)
    np.testing.assert_array_equal(pid_data_kernel[4](x), x)
