"""``with nl.no_reorder():`` (reference/nki.md §1.4): instructions inside keep their program order. Every backend
here computes in program order, so values are the same; the engine simulator's schedule is built from data
dependences and does not add the ordering edges, which can make its modelled timing optimistic for such a
block. The first use in a trace warns so (never silently dropped)."""

from __future__ import annotations

import contextlib
import warnings

from nki_dsl.trace.builder import caller_loc, current

_WARNED: set = set()


@contextlib.contextmanager
def no_reorder():
    builder = current("nl.no_reorder")
    if id(builder) not in _WARNED:
        _WARNED.add(id(builder))
        warnings.warn(f"{caller_loc()}: nl.no_reorder: values follow program order on every backend, but the "
                      f"simulator's modelled schedule does not enforce the block's order", stacklevel=3)  # fmt: skip
    yield
