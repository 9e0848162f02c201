"""SPMD launch-grid queries: ``program_id``, ``num_programs``, ``program_ndim``, ``nc``, ``spmd_dim``."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue


def program_id(axis):
    """This instance's index along grid ``axis`` (symbolic: one trace serves every instance)."""
    grid = current("nl.program_id").kernel.grid
    if not 0 <= int(axis) < max(len(grid), 1):
        raise NkiApiError(f"program_id({axis}) on a launch grid of rank {len(grid)}", caller_loc(), "nl.program_id")
    return IndexValue(Affine.var(f"pid{int(axis)}"))


def num_programs(axes=None):
    """Grid size along ``axes`` (all axes when None): a Python int."""
    grid = current("nl.num_programs").kernel.grid or (1,)
    if axes is None:
        axes = range(len(grid))
    elif isinstance(axes, int):
        return grid[axes]
    n = 1
    for a in axes:
        n *= grid[a]
    return n


def program_ndim():
    return len(current("nl.program_ndim").kernel.grid)


def nc(n: int) -> int:
    """``kernel[nl.nc(2), ...]``: spread a grid axis over NeuronCores; here the grid runs on one core."""
    return int(n)


def spmd_dim(*sizes) -> int:
    n = 1
    for s in sizes:
        n *= int(s)
    return n
