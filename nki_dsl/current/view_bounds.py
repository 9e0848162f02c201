"""Indexing a view stays inside the view (reference/nki.md §5.1 ``err_tensor_access_out_of_bound``, applied to the
view's axes), checked at the kernel line while a current-API kernel is traced.

The verifier's ``out-of-bounds`` rule checks every access against its tensor's storage. That is enough for a
whole tensor, but a view's axes are narrower than the storage's: the current API stores an on-chip
``[128, 4, 16]`` tensor as ``[128, 64]`` (``current/language/creation.py``), so ``t[:, 0, 16:20]`` would address
row 1's first elements and stay inside the storage, and a slice ``t[:, 0:64]`` indexed again at ``[:, 60:70]``
would run past the slice into the rest of the tensor. So each index of a view's axis is bounded by the view here,
over the values the tile axes, the open loops (from their start to their last value) and the program ids take.
An index whose range is not known at trace time (a shape family's symbol) is left to the verifier's storage
bounds. A runtime loop's index has no range yet (the loop's bound is inferred when it closes, from the accesses
its body makes: ``current/dynamic.py``), so an index over one runtime loop variable records instead the most
trips for which it stays inside the view's axis (``trips_limit``), which that inference takes as a bound too.
"""

from __future__ import annotations

import weakref

from nki_dsl.errors import NkiTraceError
from nki_dsl.ir.affine import Affine, format_affine, var_kind
from nki_dsl.trace.access import _advanced, _basic, _expand
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.reshape import described

RULE = "out-of-bounds"


def check(view, key) -> None:
    """Raise if ``view[key]`` (a ``TileView``, ``key`` as the current API rewrote it) leaves the view's axes."""
    base = view.access()
    loc = caller_loc()
    try:
        entries = _expand(key, len(base.shape), loc)
        if any(isinstance(e, IndexValue) and e.shape for e in entries):
            exprs, shape = _advanced(entries, loc)
        else:
            exprs, shape = _basic(entries, base.shape, loc)
    except NkiTraceError:
        return  # a malformed key: index_access reports it with its own message
    ranges = _ranges(shape)
    runtime = {lp.var: lp for lp in current("indexing").loops if lp.runtime}
    for axis, (expr, size) in enumerate(zip(exprs, base.shape)):
        if not isinstance(size, int):
            continue
        unknown = expr.vars() - ranges.keys()
        if len(unknown) == 1 and (lp := runtime.get(next(iter(unknown)))) is not None:
            _limit(lp, expr, size, ranges)
            continue
        if unknown:
            continue
        lo, hi = expr.bounds(ranges)
        if lo >= 0 and hi < size:
            continue
        where = f"exceeds its size of {size}" if hi >= size else "goes below 0"
        raise NkiTraceError(f"{RULE}: out-of-bound access for {described(base)} on view axis {axis}: index range "
                            f"[{lo}, {hi}] {where}; the index is {format_affine(expr)}{_named(expr)} (an index "
                            f"past a view's axis would address other elements of its storage)", loc)  # fmt: skip


# runtime loop -> the most trips for which every view index over its variable stays inside the view's axis
_LIMITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trips_limit(loop) -> int | None:
    """The most trips of runtime ``loop`` that keep the view indices over its variable inside their views."""
    return _LIMITS.get(loop)


def _limit(loop, expr, size: int, ranges) -> None:
    c = expr.coef(loop.var)
    rest = (expr - Affine.var(loop.var, c)).bounds(ranges)
    lo, hi = rest
    # the largest index value i with 0 <= c*i + rest <= size - 1 for every rest in [lo, hi] (as dynamic.py does)
    i_max = (size - 1 - hi) // c if c > 0 else lo // -c
    trips = max(0, (i_max - loop.start) // loop.step + 1) if i_max >= loop.start else 0
    _LIMITS[loop] = min(trips, _LIMITS.get(loop, trips))


def _ranges(shape) -> dict[str, tuple[int, int]]:
    builder = current("indexing")
    ranges = {f"d{k}": (0, s - 1) for k, s in enumerate(shape) if isinstance(s, int)}
    ranges.update({f"pid{n}": (0, g - 1) for n, g in enumerate(builder.kernel.grid or (1,))})
    for lp in builder.loops:
        if not lp.runtime and lp.trip_count > 0:
            ranges[lp.var] = (lp.start, lp.last)
    return ranges


def _named(expr) -> str:
    loops = {lp.var: lp for lp in current("indexing").loops}
    parts = [f"{v} from the loop at line {loops[v].loc.line}" for v in sorted(expr.vars())
             if var_kind(v) == "loop" and v in loops]  # fmt: skip
    return " with " + " and ".join(parts) if parts else ""
