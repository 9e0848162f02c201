"""Loops whose trip count is known only when they run (the current API's ``nl.dynamic_range`` / ``nl.fori_loop``
with a register bound, and ``nl.while_loop``; reference/nki.md §2.7 "Control flow").

A register is a one-element integer tensor on chip (the front end's ``nisa.register_alloc`` makes a ``[1, 1]``
int32 SBUF tensor; reference/nki.md §2.7 "Access patterns" accepts "1x1 SBUF or register" in the same places). A
runtime loop is an ordinary ``Loop`` with one of two kinds and ``Loop.reads``, an access of such an element:

* ``dynamic``: ``range(start, reg, step)`` with ``reg`` read once, when the loop is entered. ``Loop.stop`` is the
  declared bound on that value: the loop runs at most as far as a static ``range(start, stop, step)`` would.
* ``while``: runs while ``reg`` is non-zero, read before every iteration (the body usually writes it). ``start``
  is 0 and ``step`` 1, so the index counts iterations; ``Loop.stop`` is the declared bound on their number.
* ``scalar_offset``: runs its body (the one instruction an ``.ap(..., scalar_offset=reg)`` view feeds) once, with
  the index equal to ``reg``, which must lie in ``range(start, stop, step)``: the accesses move with the index
  as they would with a loop's, so the offset is an affine term ``stride * i`` of an ordinary index expression.

Why a declared bound: everything static works over it unchanged. The verifier proves bounds and dependences over
``range(start, stop, step)`` (a superset of every run), the budgets count its iterations (so IR from outside can
never ask for an unbounded loop), the allocator sees an ordinary loop body. Each backend checks the register when
the loop runs and raises ``NkiRuntimeError`` naming the line, the loop and the value if a run would go past the
bound (``bound_error``), as NKI's hardware DGE checks dynamic addresses at run time (§2.7 "Data movement").

IR text: ``dynamic i0 = range(0, 64, 1) reads %n[0, 0 ; 1x1] loc(7) {``, ``while i1 = range(0, 100, 1) reads
%c loc(9) {`` and ``scalar_offset i2 = range(0, 385, 1) reads %r loc(11) {``.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiRuntimeError, SourceLoc
from nki_dsl.ir.nodes import Access, Loop

KINDS = ("dynamic", "while", "scalar_offset")
API = {"dynamic": "nl.dynamic_range", "while": "nl.while_loop", "scalar_offset": "ap(scalar_offset=)"}


def register_problem(access: object) -> str | None:
    """Why ``access`` cannot be a runtime loop's register, or None."""
    if not isinstance(access, Access):
        return f"its register must be a tensor access, not {type(access).__name__}"
    t = access.tensor.type
    if not t.buffer.on_chip or t.buffer.value != "sbuf":
        return f"its register %{access.tensor.name} must be in SBUF, not {t.buffer.value}"
    d = dtypes.BY_NAME.get(t.dtype)
    if d is None or d.kind not in ("int", "uint") or d.is_packed:
        return f"its register %{access.tensor.name} must hold an integer, not {t.dtype}"
    if any(s != 1 for s in access.shape):
        return f"its register must be one element, not an access of shape {list(access.shape)}"
    return None


def pairing_problem(loop: Loop) -> str | None:
    """Why ``loop`` has a register it should not have, or lacks one (the parser checks this much: text of a runtime
    loop without its register has no meaning; everything else is the verifier's ``structure`` rule)."""
    if loop.kind not in KINDS:
        return None if loop.reads is None else f"a {loop.kind} loop reads no register"
    if loop.reads is None:
        what = {"dynamic": "stop", "while": "condition", "scalar_offset": "index"}[loop.kind]
        return f"a {loop.kind} loop must read its {what} from a register"
    return None


def shape_problem(loop: Loop) -> str | None:
    """Why a runtime loop's kind, register and declared range do not fit together, or None."""
    problem = pairing_problem(loop)
    if problem is not None or loop.kind not in KINDS:
        return problem
    problem = register_problem(loop.reads)
    if problem is not None:
        return problem
    if loop.kind == "while" and (loop.start != 0 or loop.step != 1):
        return (f"a while loop counts its iterations: range(0, bound, 1), not "
                f"range({loop.start}, {loop.stop}, {loop.step})")
    if isinstance(loop.stop, int) and loop.trip_count < 1:
        return (f"its declared bound allows no iteration (range({loop.start}, {loop.stop}, {loop.step})); a runtime "
                f"loop declares the largest range it may run")  # fmt: skip
    return None


def bound_error(kind: str, var: str, value: int, start: int, stop: int, loc: SourceLoc) -> NkiRuntimeError:
    """A run went past a runtime loop's declared bound."""
    if kind == "scalar_offset":
        msg = (f"the scalar_offset register holds {value}, which moves the access outside its tensor (it stays "
               f"inside for offsets in range({start}, {stop}))")  # fmt: skip
    elif kind == "while":
        msg = (f"the {API[kind]} loop {var} still had a non-zero condition register ({value}) after {stop} "
               f"iterations, its declared bound (max_trip={stop})")  # fmt: skip
    else:
        msg = (f"the {API[kind]} loop {var} read stop {value} from its register, past its declared bound {stop} "
               f"(range({start}, {stop})); declare a larger max_trip or keep the register within it")  # fmt: skip
    return NkiRuntimeError(msg, loc, API[kind])


def expression_range(e, skip: str, shape: tuple[int, ...], ranges: dict) -> tuple[int, int] | None:
    """The least and greatest value of affine ``e`` without its ``skip`` term, its access axes ``d<k>`` ranging
    over ``shape`` and other variables over ``ranges`` (inclusive); None if a variable has no known range."""
    lo = hi = e.const
    for v, k in e.terms:
        if v == skip:
            continue
        if v.startswith("d") and v[1:].isdigit():
            n = int(v[1:])
            r = (0, shape[n] - 1) if n < len(shape) else None
        else:
            r = ranges.get(v)
        if r is None:
            return None
        lo, hi = lo + min(k * r[0], k * r[1]), hi + max(k * r[0], k * r[1])
    return lo, hi
