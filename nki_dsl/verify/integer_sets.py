"""Does a system of linear constraints have an integer point in a box? The verifier's exact integer-set questions.

A constraint ``sum(coef * var) + const`` is ``== 0`` (``eq``) or ``>= 0``; every variable is an integer in an
inclusive range. The answer comes from interval propagation with a divisibility (GCD) test, and from splitting the
smallest unresolved range in two when propagation stalls. Each split halves a range, so the work grows with the
logarithm of the ranges (loop trip counts, tile extents), not with them; after ``max_nodes`` splits the answer is
"maybe" (``True``), which every caller treats as its safe side.

Two things keep propagation from crawling. First, the equalities with a unit coefficient are substituted out
before it starts (``verify/integer_equalities.py``): a chain of derived sizes ``$c1 = $c0 + 1``, ... is one affine
expression in the base size, not a path along which two constraints tighten each other's ranges by one per pass,
up to the range (65,536 passes over the chain for a family over ``1..65536``). Second, a node asks Fourier-Motzkin
elimination (``verify/rational_sets.py``), whose "no" is a proof, before it splits, and when its propagation has
not settled after ``SLOW_PASSES`` passes: propagation crawls when each pass moves a bound by a little, which is
what a system with no rational point does (``N <= d0 + 128*i`` and ``d0 + 128*i <= N - 1`` raise ``N``'s lower
end by one per pass), and splitting such a box only makes two that crawl.

The work is bounded in steps, one step for each constraint read or rewritten (elimination's rows included):
``MAX_STEPS`` per question by default, whose exhaustion answers "maybe" like the node budget, or a ``Work`` a
caller shares between questions (a family proof's), whose exhaustion raises ``WorkExhaustedError`` so the caller
can name the limit it ran into.
"""

from __future__ import annotations

from math import gcd

from nki_dsl.ir.affine import Affine
from nki_dsl.verify.integer_equalities import Charge, reduce
from nki_dsl.verify.rational_sets import may_have_point

MAX_NODES = 2000  # a search budget, not a hardware number: each node halves one range
# Steps (constraints read or rewritten) one question may take when its caller shares no Work: seconds (10 to 25
# microseconds a step on a loaded 2-core machine), far above what the library's questions take (a few thousand).
MAX_STEPS = 1_000_000
SLOW_PASSES = 8  # propagation passes at a node before elimination is asked whether there is any rational point


class WorkExhaustedError(Exception):
    """A shared ``Work`` ran out: the question was not answered (raised only to a caller that passed one)."""

    def __init__(self, limit: int):
        super().__init__(f"the integer search ran out of its {limit} steps")
        self.limit = limit


class Work(Charge):
    """A budget of steps shared by the questions it is passed to (``has_point(..., work=)``)."""

    def __init__(self, steps: int):
        self.limit = steps
        self.left = steps

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise WorkExhaustedError(self.limit)

Constraint = tuple[dict[str, int], int, bool]
Ranges = dict[str, tuple[int, int]]


def at_least(e: Affine) -> Constraint:
    """``e >= 0``."""
    return dict(e.terms), e.const, False


def equal(e: Affine) -> Constraint:
    """``e == 0``."""
    return dict(e.terms), e.const, True


def has_point(constraints: list[Constraint], ranges: Ranges, max_nodes: int = MAX_NODES,
              work: Work | None = None) -> bool:  # fmt: skip
    """True if some integer point of the box ``ranges`` meets every constraint (or the search ran out of nodes,
    or of its ``MAX_STEPS`` steps). With ``work``, the steps are taken from it, and running out raises
    ``WorkExhaustedError``."""
    for coefs, _, _ in constraints:
        for v in coefs:
            if v not in ranges:
                raise ValueError(f"variable {v!r} has no range")
    budget = Work(MAX_STEPS) if work is None else work
    try:
        reduced = reduce(constraints, ranges, budget)
        if reduced is None:
            return False
        return _feasible(*reduced, [max_nodes], budget)
    except WorkExhaustedError:
        if work is None:
            return True
        raise


def maximum(e: Affine, constraints: list[Constraint], ranges: Ranges, max_nodes: int = MAX_NODES) -> int | None:
    """The largest value of ``e`` over the integer points meeting the constraints (None if there is none); an upper
    bound of it when a search runs out of nodes. A binary search over ``has_point``, from ``e``'s interval bounds."""
    lo, hi = e.bounds(ranges)
    if not has_point(constraints + [at_least(e - lo)], ranges, max_nodes):
        return None
    while lo < hi:  # invariant: some point reaches lo, none reaches beyond hi
        mid = (lo + hi + 1) // 2
        if has_point(constraints + [at_least(e - mid)], ranges, max_nodes):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _feasible(constraints: list[Constraint], ranges: Ranges, budget: list[int], work: Work) -> bool:
    settled = _propagate(constraints, ranges, work, SLOW_PASSES)
    if settled is False:
        return False
    # crawling: has the system a rational point at all? (a "no" is a proof, see above) If so, propagate to the end.
    if settled is None and not (may_have_point(constraints, ranges, work) and _propagate(constraints, ranges, work)):
        return False
    open_vars = [v for v, (lo, hi) in ranges.items() if hi > lo]
    if not open_vars:
        return True  # _propagate checked every constraint at this single point
    if settled and not may_have_point(constraints, ranges, work):
        return False  # no rational point in the box: no split needed
    budget[0] -= 1
    if budget[0] <= 0:
        return True
    v = min(open_vars, key=lambda n: ranges[n][1] - ranges[n][0])
    lo, hi = ranges[v]
    mid = (lo + hi) // 2
    for part in ((lo, mid), (mid + 1, hi)):
        trial = dict(ranges)
        trial[v] = part
        if _feasible(constraints, trial, budget, work):
            return True
    return False


def _propagate(constraints: list[Constraint], ranges: Ranges, work: Work,
               max_passes: int | None = None) -> bool | None:  # fmt: skip
    """Narrow ``ranges`` in place to what the constraints allow; False when some constraint cannot hold, None when
    the ranges still narrowed in the last of ``max_passes`` passes (what they are narrowed to holds every point)."""
    changed = True
    passes = 0
    while changed:
        if passes == max_passes:
            return None
        passes += 1
        work.spend(len(constraints))
        changed = False
        for coefs, const, eq in constraints:
            fixed = const + sum(c * ranges[v][0] for v, c in coefs.items() if ranges[v][0] == ranges[v][1])
            free = {v: c for v, c in coefs.items() if ranges[v][0] != ranges[v][1]}
            if eq and free and fixed % _gcd(free.values()):
                return False  # sum(c * x) = -fixed has no integer solution
            lo, hi = _bounds(free, fixed, ranges)
            if hi < 0 or (eq and lo > 0):
                return False
            for v, c in free.items():
                rest_lo, rest_hi = lo - _term_lo(c, ranges[v]), hi - _term_hi(c, ranges[v])
                # c * x + rest >= 0 for some rest <= rest_hi; and, for ==, c * x + rest <= 0 for some rest >= rest_lo
                new_lo, new_hi = ranges[v]
                if c > 0:
                    new_lo = max(new_lo, _ceil_div(-rest_hi, c))
                    if eq:
                        new_hi = min(new_hi, (-rest_lo) // c)
                else:
                    new_hi = min(new_hi, (-rest_hi) // c)
                    if eq:
                        new_lo = max(new_lo, _ceil_div(-rest_lo, c))
                if new_lo > new_hi:
                    return False
                if (new_lo, new_hi) != ranges[v]:
                    ranges[v] = (new_lo, new_hi)
                    changed = True
    return True


def _bounds(coefs: dict[str, int], const: int, ranges) -> tuple[int, int]:
    lo = const + sum(_term_lo(c, ranges[v]) for v, c in coefs.items())
    hi = const + sum(_term_hi(c, ranges[v]) for v, c in coefs.items())
    return lo, hi


def _term_lo(c: int, r: tuple[int, int]) -> int:
    return c * r[0] if c > 0 else c * r[1]


def _term_hi(c: int, r: tuple[int, int]) -> int:
    return c * r[1] if c > 0 else c * r[0]


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _gcd(values) -> int:
    g = 0
    for v in values:
        g = gcd(g, v)
    return g or 1
