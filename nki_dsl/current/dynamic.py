"""Runtime loops of the current API (reference/nki.md §2.7 "Control flow"): ``dynamic_range``, ``fori_loop`` and
``while_loop`` emit their body once, as a loop the hardware runs (never unrolled, whatever the body does with
Python state: such state "changes once, at trace"). Their index is a register: it can index tensors (it is a
symbolic loop index here) but not decide Python control flow.

* Python-int bounds give an ordinary ``sequential`` loop (its trip count is known: nothing to read at run time).
* A register stop (``nisa.register_alloc`` / ``register_load``, ``current/isa/registers.py``) gives a ``dynamic``
  loop that reads it once, at entry; ``while_loop(init, body_fun)`` a ``while`` loop that re-reads its condition
  register before every iteration (``ir/runtime_loops.py`` has the IR, the backends and the checks). The third
  runtime kind, ``scalar_offset``, is ``.ap(scalar_offset=reg)`` / ``.select(dim, reg)`` (``trace/runtime_offset.py``).

Every runtime loop has a declared bound, which the verifier's bounds and dependence rules, the budgets and the
allocator work over, and which a run going past raises ``NkiRuntimeError`` for. NKI's compiler takes it from the
register's allocation; here it is, in order:

1. ``max_trip=N``, this project's keyword (the most iterations the loop may run), when the kernel gives it;
2. else, for ``dynamic_range`` / ``fori_loop``: the largest trip count for which every access the body makes at
   an index over the loop variable stays inside its tensor (``_inferred_trips``; a KV-cache loop over
   ``k_cache[:, i * 128 ...]`` gets ``seq_max // 128``) and inside the axis of the view it indexes
   (``view_bounds.trips_limit``: an on-chip ``[P, 4, 16]`` view is stored ``[P, 64]``). A register value beyond
   it would have the loop read or write outside a tensor, so the run-time refusal is the bounds error NKI's DGE
   raises (§2.7 "Data movement");
3. else ``DEFAULT_MAX_TRIP`` (a ``while_loop``, whose body has no index, or a body that indexes nothing by it).

Choices where the reference is silent: a register ``start`` is refused (the IR reads one register per loop: its
stop); ``step`` must be a positive Python int, as §2.7 says ("const positive step"); a ``while_loop`` body that
returns a register other than ``init`` has it copied into ``init`` at the end of each iteration, so the loop
re-reads one register.
"""

from __future__ import annotations

from nki_dsl.current import view_bounds
from nki_dsl.current.isa.data_movement import tensor_copy
from nki_dsl.current.isa.registers import check_register
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Loop, Op
from nki_dsl.ir.runtime_loops import expression_range
from nki_dsl.language.iterators import _bounds
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.tensor import is_tile

# The bound of a runtime loop nothing else bounds: large for a loop of a decode step or a convergence test, small
# enough that a body of tens of instructions stays inside the verifier's work budget (IRBudget.max_iterations).
DEFAULT_MAX_TRIP = 10_000


def _is_register(a) -> bool:
    return not isinstance(a, int | IndexValue) and is_tile(a)


def _max_trip(api: str, max_trip) -> int | None:
    if max_trip is None:
        return None
    if isinstance(max_trip, bool) or not isinstance(max_trip, int) or max_trip < 1:
        raise NkiApiError(f"max_trip={max_trip!r} must be a positive Python int (the most iterations the loop may "
                          f"run)", caller_loc(), api)  # fmt: skip
    return max_trip


def _runtime_bounds(api: str, args) -> tuple[int, object, int]:
    """``(start, stop, step)``; ``stop`` a register tile or an int."""
    if len(args) not in (1, 2, 3):
        raise NkiApiError(f"{api} takes (stop), (start, stop) or (start, stop, step)", caller_loc(), api)
    stop_at = 0 if len(args) == 1 else 1
    for k, a in enumerate(args):
        if _is_register(a) and k != stop_at:
            what = "start" if k == 0 else "step"
            raise NkiApiError(f"a register {what} is not modelled: only the stop of a runtime loop may be a "
                              f"register (the step is a constant, §2.7); pass {what} as a Python int",
                              caller_loc(), api)  # fmt: skip
    reg = args[stop_at]
    if not _is_register(reg):
        return _bounds(api, args)
    ints = list(args)
    ints[stop_at] = 0
    start, _, step = _bounds(api, ints)
    check_register(api, "stop", reg)
    return start, reg, step


def dynamic_range(*args, max_trip=None):
    """A runtime loop over ``range(start, stop, step)``: the body is traced once. ``stop`` may be a register."""
    api = "nl.dynamic_range"
    builder = current(api)
    start, stop, step = _runtime_bounds(api, args)
    declared = _max_trip(api, max_trip)
    if isinstance(stop, int):
        if stop <= start:
            return
        loop = builder.open_loop("sequential", start, stop, step, caller_loc())
        try:
            yield IndexValue(Affine.var(loop.var))
        finally:
            builder.close_loop(loop)
        return
    enclosing = builder.loops
    loop = builder.open_loop("dynamic", start, start + step, step, caller_loc())
    loop.reads = stop.access()
    try:
        yield IndexValue(Affine.var(loop.var))
    finally:
        builder.close_loop(loop)
        trips = declared or _bound(_inferred_trips(loop, enclosing, builder.kernel.grid),
                                   view_bounds.trips_limit(loop)) or DEFAULT_MAX_TRIP  # fmt: skip
        loop.stop = start + trips * step


def fori_loop(lower, upper, body_fun, step=1, max_trip=None):
    """``for i in dynamic_range(lower, upper, step): body_fun(i)``; ``body_fun`` returns nothing."""
    if not callable(body_fun):
        raise NkiApiError(f"nl.fori_loop: body_fun must be a function, got {type(body_fun).__name__}", caller_loc())
    for i in dynamic_range(lower, upper, step, max_trip=max_trip):
        if body_fun(i) is not None:
            raise NkiApiError("nl.fori_loop: body_fun returns nothing (loop state lives in SBUF/HBM tensors)",
                              caller_loc())  # fmt: skip


def while_loop(init, body_fun, max_trip=None):
    """Run ``body_fun(register)`` while the register is non-zero (0 iterations if ``init`` holds 0); the body
    returns the register holding the next condition. At most ``max_trip`` iterations (default
    ``DEFAULT_MAX_TRIP``): a run still going then raises ``NkiRuntimeError``."""
    api = "nl.while_loop"
    builder = current(api)
    check_register(api, "init", init)
    if not callable(body_fun):
        raise NkiApiError(f"body_fun must be a function, got {type(body_fun).__name__}", caller_loc(), api)
    trips = _max_trip(api, max_trip) or DEFAULT_MAX_TRIP
    loop = builder.open_loop("while", 0, trips, 1, caller_loc())
    loop.reads = init.access()
    try:
        nxt = body_fun(init)
        if nxt is None:
            raise NkiApiError("body_fun must return the register holding the next condition (return the one "
                              "it was given after writing it, e.g. with nisa.register_load)",
                              caller_loc(), api)  # fmt: skip
        check_register(api, "the value body_fun returns", nxt)
        if not _same(nxt.access(), loop.reads):
            tensor_copy(dst=init, src=nxt)  # the loop re-reads one register (see the module docstring)
    finally:
        builder.close_loop(loop)


def _bound(storage: int | None, views: int | None) -> int | None:
    """The tighter of the bounds the storage's and the views' axes give (``view_bounds.trips_limit``)."""
    if storage is None or views is None:
        return storage if views is None else max(1, views)
    return max(1, min(storage, views))


def _same(a: Access, b: Access) -> bool:
    return a.tensor is b.tensor and a.index == b.index


# -- the bound a dynamic loop's body implies ------------------------------------------------------------------------


def _inferred_trips(loop: Loop, enclosing: tuple[Loop, ...], grid: tuple[int, ...]) -> int | None:
    """The largest trip count for which every unmasked access of ``loop``'s body whose index moves with the loop
    variable stays inside its tensor (None if no access moves with it). Each index is ``c * i + rest``; ``rest``
    ranges over the access's axes, the other loops' ranges and the program ids."""
    ranges: dict[str, tuple[int, int]] = {f"pid{g}": (0, n - 1) for g, n in enumerate(grid or (1,))}
    for lp in enclosing:
        ranges[lp.var] = (lp.start, max(lp.start, lp.last))
    best: int | None = None

    def visit(body):
        nonlocal best
        for stmt in body:
            if isinstance(stmt, Loop):
                ranges[stmt.var] = (stmt.start, max(stmt.start, stmt.last))
                visit(stmt.body)
                continue
            if not isinstance(stmt, Op) or stmt.mask is not None:
                continue  # a masked access may lean past its tensor where the mask cuts it: no bound from it
            for a in stmt.operands.values():
                if isinstance(a, Access):
                    for trips in _access_trips(a, loop, ranges):
                        best = trips if best is None else min(best, trips)

    visit(loop.body)
    return None if best is None else max(1, best)


def _access_trips(a: Access, loop: Loop, ranges):
    for e, dim in zip(a.index, a.tensor.type.shape):
        c = dict(e.terms).get(loop.var, 0)
        rest = expression_range(e, loop.var, a.shape, ranges) if c and isinstance(dim, int) else None
        if rest is None:
            continue
        lo, hi = rest
        # the largest index value i with 0 <= c*i + rest <= dim - 1 for every rest in [lo, hi]
        i_max = (dim - 1 - hi) // c if c > 0 else lo // -c
        yield (i_max - loop.start) // loop.step + 1 if i_max >= loop.start else 0
