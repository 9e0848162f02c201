"""Specialisation of current-API kernels: Python's loop semantics, traced compactly where the body allows it.

The current NKI compiler unrolls every loop but ``dynamic_range`` at specialisation (reference/nki.md §2.6, §2.7
"Control flow"): ``affine_range``/``sequential_range`` are aliases of ``range``, so a kernel may build a Python list
of tiles in one loop (``tiles.append(t)``) and index it with the loop variable of another (``tiles[k]``), or branch
on the index (``if k == 0``). Unrolling every loop would make trace time and IR size grow with trip counts.

The rule chosen here: *speculate symbolic, unroll on evidence*. A loop written as a plain ``for`` statement over
the range call (``for k in nl.affine_range(n):``, checked on the kernel's source) is first traced once with a
symbolic index, as legacy loops are; any other use of the iterator (``zip(nl.affine_range(n), tiles)``,
``list(...)``, a comprehension, a kernel without source) is unrolled from the start. The trace is redone with a
loop unrolled (by its source line) when it shows that the body needs Python's semantics:

1. the index is needed as a Python int or bool (``tiles[k]``, ``if k == 0``, ``range(k)``, ``k % 2``): the hook
   of ``trace/index.py`` raises ``Respecialize`` at once;
2. after the symbolic iteration, Python state of the frame running the loop changed: a list, dict, set or
   ``NKIObject`` existing before the loop was mutated (``tiles.append(t)``), or a variable the loop carries
   (read before assigned in the body, ``carried.py``) was rebound (``count += 1``, ``acc = acc + x``);
3. after the trace, a tile made inside the loop is read after it (the legacy ``scope`` rule's finding: the
   Python variable holds the last iteration's tile).

Separately, an ``affine_range`` loop whose iterations the ``affine-dependence`` rule finds dependent becomes a
``sequential`` loop (the current API's loops run in order; only independent ones are marked affine).

Not detected: state mutated through globals or through objects deeper than a few levels below a local; such a
kernel should use ``nl.static_range`` (always unrolled) for that loop.
"""

from __future__ import annotations

import contextvars
import sys
from dataclasses import dataclass, field

from nki_dsl.current.indexing import current_key
from nki_dsl.current.isa import accumulators
from nki_dsl.errors import NkiTraceError, SourceLoc
from nki_dsl.ir.instantiate import substitute
from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.ir.symbols import ranges
from nki_dsl.trace.index import IndexValue, MaskValue, concrete_index_hook
from nki_dsl.trace.tensor import NkiTensor, TileView, index_key_hook
from nki_dsl.trace.tracer import trace_kernel

MAX_ROUNDS = 50  # each round unrolls at least one more loop statement; a kernel has far fewer
_FINGERPRINT_DEPTH = 4
_FINGERPRINT_ITEMS = 100_000

_active: contextvars.ContextVar[Specializer | None] = contextvars.ContextVar("nki_specializer", default=None)


class Respecialize(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Raised inside a trace to restart it with more loops unrolled. A BaseException, so that no ``except
    Exception`` in kernel or library code swallows it."""

    def __init__(self, locs: set[SourceLoc]):
        super().__init__(sorted(str(x) for x in locs))
        self.locs = locs


@dataclass
class Decisions:
    """What the rounds so far learnt, per loop statement (its source location)."""

    unroll: set[SourceLoc] = field(default_factory=set)
    sequential: set[SourceLoc] = field(default_factory=set)
    rounds: int = 0


class Specializer:
    """The state of one trace round: which loop statements to unroll, and the evidence found for more."""

    def __init__(self, decisions: Decisions):
        self.decisions = decisions
        self.loop_locs: dict[str, SourceLoc] = {}  # IR loop variable -> the loop statement that opened it
        self.found: set[SourceLoc] = set()

    def unrolls(self, loc: SourceLoc) -> bool:
        return loc in self.decisions.unroll

    def kind(self, loc: SourceLoc, requested: str) -> str:
        return "sequential" if loc in self.decisions.sequential else requested

    def opened(self, loop: Loop, loc: SourceLoc) -> None:
        self.loop_locs[loop.var] = loc

    def needs_int(self, variables: set[str]) -> None:
        """The hook of ``trace/index.py``: a symbolic index of these loops is needed as a Python value."""
        locs = {self.loop_locs[v] for v in variables if v in self.loop_locs}
        if locs:
            raise Respecialize(locs)

    def carried(self, loc: SourceLoc) -> None:
        self.found.add(loc)


def current() -> Specializer | None:
    return _active.get()


def trace_specialized(fn, bound, grid: tuple[int, ...], target, decisions: Decisions | None = None):
    """Trace a current-API kernel, redoing the trace until no loop traced symbolically needs unrolling.
    ``decisions`` carries what earlier specialisations of the kernel learnt (unrolling a loop is always correct,
    so starting from them only saves rounds); it is updated in place. Returns ``(kernel, target facts read)``, as
    ``trace.tracer.trace_kernel`` does."""
    decisions = Decisions() if decisions is None else decisions
    decisions.rounds = 0
    while True:
        decisions.rounds += 1
        if decisions.rounds > MAX_ROUNDS:
            raise NkiTraceError(f"kernel {fn.__name__}: specialisation did not settle after {MAX_ROUNDS} rounds")
        spec = Specializer(decisions)
        token, hook = _active.set(spec), concrete_index_hook.set(spec.needs_int)
        keys = index_key_hook.set(current_key)
        try:
            kernel, facts = trace_kernel(fn, bound, grid, target)
        except Respecialize as r:
            decisions.unroll |= r.locs | spec.found
            continue
        except Exception:
            if spec.found - decisions.unroll:  # an error after Python state went wrong: retry with the fix first
                decisions.unroll |= spec.found
                continue
            raise
        finally:
            index_key_hook.reset(keys)
            concrete_index_hook.reset(hook)
            _active.reset(token)
        accumulators.finish(kernel)  # the checks of register commands in loops that only the end of a trace closes
        more = (spec.found | _read_after_loop(kernel, spec)) - decisions.unroll
        if more:
            decisions.unroll |= more
            continue
        dependent = _dependent_affine_loops(kernel, target, spec) - decisions.sequential
        if dependent:
            decisions.sequential |= dependent
            continue
        kernel.specialization_rounds = decisions.rounds  # type: ignore[attr-defined]  # for benchmarks/tests
        return kernel, facts


def _read_after_loop(kernel: Kernel, spec: Specializer) -> set[SourceLoc]:
    """Loops that made a tensor read after them (the legacy ``scope`` rule's finding)."""
    from nki_dsl.verify.program import common_depth, program  # deferred: import nki_dsl does not load the verifier

    prog, locs = program(kernel), set()
    for t, def_site in prog.defs.items():
        if not def_site.loops:
            continue
        for use in prog.uses.get(t, ()):
            k = common_depth(def_site.loops, use.site.loops)
            locs |= {spec.loop_locs[lp.var] for lp in def_site.loops[k:] if lp.var in spec.loop_locs}
    return locs


def _dependent_affine_loops(kernel: Kernel, target, spec: Specializer) -> set[SourceLoc]:
    """Affine loops enclosing an op the ``affine-dependence`` rule objects to."""
    from nki_dsl.verify.rules import affine_dependence  # deferred: import nki_dsl does not load the verifier

    checked = kernel
    if kernel.symbols:  # a shape family: its upper kernel, where every loop runs longest (verify/family.py MONOTONE)
        checked = substitute(kernel, {n: hi for n, (_, hi) in ranges(kernel.symbols).items()})
    bad = {d.loc for d in affine_dependence.check(checked, target)}
    if not bad:
        return set()
    locs = set()
    for op, loops in kernel.walk():
        if isinstance(op, Op) and op.loc in bad:
            locs |= {spec.loop_locs[lp.var] for lp in loops if lp.kind == "affine" and lp.var in spec.loop_locs}
    return locs


# -- Python state of the frame running a loop ---------------------------------------------------------------------
def snapshot(frame) -> dict[str, tuple]:
    """``{local name: (value, fingerprint)}`` of a frame, before a symbolic loop body runs."""
    return {name: (value, _fingerprint(value, _FINGERPRINT_DEPTH, [0])) for name, value in frame.f_locals.items()}


def state_changed(frame, before: dict[str, tuple], index: IndexValue, carried: frozenset[str]) -> bool:
    """Did one symbolic iteration change Python state the next iteration (or the code after the loop) sees?

    An object existing before the loop and changed in place (a list appended to, an ``NKIObject`` attribute set)
    always counts. A rebinding counts only for a variable the loop carries (``carried``, from the loop's source:
    read before assigned in the body)."""
    for name, value in frame.f_locals.items():
        if name not in before or value is index:
            continue  # first bound in the body, or the loop variable
        old, old_print = before[name]
        if value is old:
            if _fingerprint(value, _FINGERPRINT_DEPTH, [0]) != old_print:
                return True  # mutated in place
            continue
        if name in carried:
            return True
    return False


def _fingerprint(x, depth: int, budget: list[int]):
    """A comparable summary of a value: identity for tiles and opaque objects, contents for containers (to a
    bounded depth and size), so that a mutation in place shows as a different fingerprint."""
    budget[0] += 1
    if budget[0] > _FINGERPRINT_ITEMS:
        return ("big", id(x))
    if x is None or isinstance(x, bool | int | float | str | bytes | complex):
        return ("v", type(x).__name__, x)
    if isinstance(x, NkiTensor | TileView | IndexValue | MaskValue):
        return ("id", id(x))
    if depth <= 0:
        return ("id", id(x))
    if isinstance(x, list | tuple):
        return (type(x).__name__, id(x) if isinstance(x, list) else 0,
                tuple(_fingerprint(e, depth - 1, budget) for e in x))  # fmt: skip
    if isinstance(x, dict):
        return ("dict", id(x), tuple((repr(k), _fingerprint(v, depth - 1, budget)) for k, v in x.items()))
    if isinstance(x, set | frozenset):
        return ("set", id(x), frozenset(id(e) for e in x))
    state = getattr(x, "__dict__", None)
    if isinstance(state, dict) and _user_object(x):
        return ("obj", id(x), tuple((k, _fingerprint(v, depth - 1, budget)) for k, v in state.items()))
    return ("id", id(x))


def _user_object(x) -> bool:
    """Instances of user classes (kernel helpers, NKIObject), not modules, functions or classes."""
    module = type(x).__module__ or ""
    return not (isinstance(x, type) or callable(x) or module in ("builtins", "types") or module.startswith("nki_dsl"))


def caller_frame(depth: int):
    return sys._getframe(depth + 1)
