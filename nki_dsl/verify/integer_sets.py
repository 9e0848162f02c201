"""Does a system of linear constraints have an integer point in a box? The verifier's exact integer-set questions.

A constraint ``sum(coef * var) + const`` is ``== 0`` (``eq``) or ``>= 0``; every variable is an integer in an
inclusive range. The answer comes from interval propagation with a divisibility (GCD) test, and from splitting the
smallest unresolved range in two when propagation stalls. Each split halves a range, so the work grows with the
logarithm of the ranges (loop trip counts, tile extents), not with them; after ``max_nodes`` splits the answer is
"maybe" (``True``), which every caller treats as its safe side.
"""

from __future__ import annotations

from math import gcd

from nki_dsl.ir.affine import Affine

MAX_NODES = 2000  # a search budget, not a hardware number: each node halves one range

Constraint = tuple[dict[str, int], int, bool]
Ranges = dict[str, tuple[int, int]]


def at_least(e: Affine) -> Constraint:
    """``e >= 0``."""
    return dict(e.terms), e.const, False


def equal(e: Affine) -> Constraint:
    """``e == 0``."""
    return dict(e.terms), e.const, True


def has_point(constraints: list[Constraint], ranges: Ranges, max_nodes: int = MAX_NODES) -> bool:
    """True if some integer point of the box ``ranges`` meets every constraint (or the search ran out of nodes)."""
    for coefs, _, _ in constraints:
        for v in coefs:
            if v not in ranges:
                raise ValueError(f"variable {v!r} has no range")
    return _feasible(constraints, dict(ranges), [max_nodes])


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


def _feasible(constraints: list[Constraint], ranges: Ranges, budget: list[int]) -> bool:
    if not _propagate(constraints, ranges):
        return False
    open_vars = [v for v, (lo, hi) in ranges.items() if hi > lo]
    if not open_vars:
        return True  # _propagate checked every constraint at this single point
    budget[0] -= 1
    if budget[0] <= 0:
        return True
    v = min(open_vars, key=lambda n: ranges[n][1] - ranges[n][0])
    lo, hi = ranges[v]
    mid = (lo + hi) // 2
    for part in ((lo, mid), (mid + 1, hi)):
        trial = dict(ranges)
        trial[v] = part
        if _feasible(constraints, trial, budget):
            return True
    return False


def _propagate(constraints: list[Constraint], ranges: Ranges) -> bool:
    """Narrow ``ranges`` in place to what the constraints allow; False when some constraint cannot hold."""
    changed = True
    while changed:
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
