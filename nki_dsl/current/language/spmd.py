"""``program_id``, ``num_programs``, ``program_ndim`` of the current API: with ``kernel[lnc]`` the program id is
the logical NeuronCore (0 or 1 with LNC=2), one launch axis (reference/nki.md §2.7 "nki.language")."""

from __future__ import annotations

from nki_dsl.language import spmd as legacy
from nki_dsl.trace.builder import current


def program_id(axis=0):
    return legacy.program_id(axis)


def num_programs(axes=0):
    """Cores of the launch along ``axes`` (1 without ``kernel[lnc]``)."""
    grid = current("nl.num_programs").kernel.grid
    if not grid:
        return 1
    return legacy.num_programs(axes)


def program_ndim():
    """Rank of the launch grid: 0 without ``kernel[lnc]``, else 1."""
    return legacy.program_ndim()
