"""Loop iterators of the current API: ``affine_range``, ``sequential_range``, ``static_range`` with Python's
semantics (reference/nki.md §2.7 "Control flow": aliases of ``range``, unrolled at specialisation), traced
symbolically until the body shows it needs its index as a Python int (``specialize.py`` has the rule).

``dynamic_range`` / ``fori_loop`` / ``while_loop`` (runtime loops whose body is emitted once) are in ``dynamic.py``.
"""

from __future__ import annotations

import sys

from nki_dsl.current import specialize
from nki_dsl.current.carried import carried_names, for_statement
from nki_dsl.ir.affine import Affine
from nki_dsl.language.iterators import _bounds
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.symbolic import Dim


def _loop(kind: str, api: str, args):
    builder = current(api)
    # a shape family's trip count (``M // 128``) may be a dimension: kept as the loop's symbolic stop when the loop
    # is kept, and refused with the dimension's name when it must unroll (``range`` needs its value)
    start, stop, step = _bounds(api, args, symbolic_stop=True)
    loc = caller_loc()
    spec = specialize.current()
    frame = sys._getframe(1)  # the frame consuming this generator (the caller of its first next())
    statement = for_statement(frame.f_code, loc.line, api.split(".")[-1]) if spec is not None else None
    if spec is None or statement is None or spec.unrolls(loc):
        # Outside a current-API trace, or not a plain ``for`` over this call (zip, list, a comprehension), or
        # known to need Python ints: Python's own semantics, one iteration per index.
        del frame
        yield from range(start, stop, step)
        return
    if isinstance(stop, Dim):
        if stop.table.bounds(stop.expr)[1] <= start:
            return  # no size of the family runs the loop
        stop = stop.table.size(stop.expr, f"the stop of {api}")
    elif stop <= start:
        return
    loop = builder.open_loop(spec.kind(loc, kind), start, stop, step, loc)
    spec.opened(loop, loc)
    before = specialize.snapshot(frame)
    index = IndexValue(Affine.var(loop.var))
    try:
        yield index
        # The body ran once. If it changed Python state, the next iterations (or the code after the loop) would
        # see it: this loop statement must be unrolled.
        if specialize.state_changed(frame, before, index, carried_names(statement)):
            spec.carried(loc)
    finally:
        del frame, before
        builder.close_loop(loop)


def affine_range(*args):
    """``range`` (unrolled as the current compiler does; independent iterations are marked affine in the IR)."""
    return _loop("affine", "nl.affine_range", args)


def sequential_range(*args):
    """``range``; a loop kept in the IR is marked sequential (iterations in order)."""
    return _loop("sequential", "nl.sequential_range", args)


def static_range(*args):
    """``range``, always unrolled."""
    current("nl.static_range")
    return range(*_bounds("nl.static_range", args))
