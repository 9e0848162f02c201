"""Loop iterators. ``affine_range`` and ``sequential_range`` record a loop region and trace the body once with a
symbolic index; ``static_range`` unrolls in Python (see DESIGN.md "Loop semantics")."""

from __future__ import annotations

from nki_dsl.errors import NkiTraceError
from nki_dsl.ir.affine import Affine
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.symbolic import Dim


def _bounds(api: str, args, symbolic_stop: bool = False) -> tuple[int, int | Dim, int]:
    vals = []
    for k, a in enumerate(args):
        if symbolic_stop and isinstance(a, Dim) and k == (0 if len(args) == 1 else 1):
            vals.append(a)  # a shape family's trip count: the loop's stop is a symbol (trace/symbolic.py)
            continue
        if isinstance(a, IndexValue):
            raise NkiTraceError(f"{api} bounds must be Python ints, not the symbolic index {a.expr}", caller_loc())
        try:
            vals.append(int(a.__index__()))
        except (AttributeError, TypeError):
            raise NkiTraceError(f"{api} bounds must be ints, got {a!r}", caller_loc()) from None
    if len(vals) == 1:
        vals = [0, vals[0], 1]
    elif len(vals) == 2:
        vals.append(1)
    elif len(vals) != 3:
        raise NkiTraceError(f"{api} takes (stop), (start, stop) or (start, stop, step)", caller_loc())
    if vals[2] <= 0:
        raise NkiTraceError(f"{api} step must be positive, got {vals[2]}", caller_loc())
    return vals[0], vals[1], vals[2]


def _symbolic_loop(kind: str, api: str, args):
    builder = current(api)
    start, stop, step = _bounds(api, args, symbolic_stop=True)
    if isinstance(stop, Dim):
        if stop.table.bounds(stop.expr)[1] <= start:
            return  # no size of the family runs the loop
        stop = stop.table.size(stop.expr, f"the stop of {api}")
    elif stop <= start:
        return
    loop = builder.open_loop(kind, start, stop, step, caller_loc())
    try:
        yield IndexValue(Affine.var(loop.var))
    finally:
        builder.close_loop(loop)


def affine_range(*args):
    """Independent iterations (associative ``+=`` accumulation allowed): the default loop."""
    return _symbolic_loop("affine", "nl.affine_range", args)


def sequential_range(*args):
    """Iterations in order, for loop-carried state kept in tensors declared outside the loop."""
    return _symbolic_loop("sequential", "nl.sequential_range", args)


def static_range(*args):
    """Unrolled at trace time: the body runs once per iteration with a Python int."""
    current("nl.static_range")
    return range(*_bounds("nl.static_range", args))
