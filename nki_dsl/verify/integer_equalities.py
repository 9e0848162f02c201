"""Before searching a box for an integer point: take out every variable an equality with a unit coefficient fixes.

``x - y - 1 == 0`` over integers makes ``x`` the integer ``y + 1``: substituting it into every other constraint,
and keeping ``x``'s range as the two constraints ``lo <= y + 1 <= hi``, leaves a system whose integer points are
exactly the old ones without ``x`` (a bijection, so the answer to "is there a point?" is the same, both ways).
A family's derived symbols are such equalities (``$c = $b + 1`` is ``$b + 1 - $c >= 0`` and its opposite), and a
chain of them collapses to one affine expression in the base symbol. Left in, a chain is what made interval
propagation crawl: the constraints around it tightened each other's ranges by one per pass, up to the range.

Also, exactly in integers: each constraint is divided by the gcd of its coefficients (an inequality's constant
floored, an equality without a divisible constant has no point), two opposite inequalities are one equality,
duplicates are one constraint, and a constraint on one variable is folded into its range.
"""

from __future__ import annotations

from math import gcd
from typing import Protocol

Constraint = tuple[dict[str, int], int, bool]  # sum(coef * var) + const, == 0 if the flag is set, else >= 0
Ranges = dict[str, tuple[int, int]]


class Charge(Protocol):
    """What a caller counts the rewriting against (``integer_sets.Work``): ``spend(n)`` for ``n`` steps."""

    def spend(self, n: int) -> None: ...


def reduce(constraints: list[Constraint], ranges: Ranges, charge: Charge) -> tuple[list[Constraint], Ranges] | None:
    """An equivalent system (same integer points, less the substituted variables) and the narrowed ranges, or
    None when the rewriting alone shows there is no point. The work is the constraints read plus, per variable
    substituted, the constraints it occurs in times the terms put in for it: each step is charged to ``charge``.
    Deterministic (no set order): the same text takes the same steps in every process."""
    system = _System(dict(ranges))
    for coefs, const, eq in constraints:
        charge.spend(1)
        if not system.add(coefs, const, eq):
            return None
    while system.units:
        key = system.units.pop()
        if system.rows.get(key) is not True:
            continue  # rewritten (or its variable substituted) since it was queued
        terms, const = key
        x, c = next((v, c) for v, c in terms if c in (1, -1))
        system.remove(key)
        value = {v: -c * k for v, k in terms if v != x}  # c*x + rest + const == 0, so x == -c * (rest + const)
        value_const = -c * const
        old = [(k, system.rows[k]) for k in sorted(system.uses.get(x, ()))]
        charge.spend(len(old) * (1 + len(value)) + 2)
        for k, _ in old:
            system.remove(k)
        lo, hi = system.box.pop(x)
        for (k_terms, k_const), eq in old:
            a = dict(k_terms)[x]
            coefs = {v: k for v, k in k_terms if v != x}
            for v, k in value.items():
                coefs[v] = coefs.get(v, 0) + a * k
            if not system.add(coefs, k_const + a * value_const, eq):
                return None
        neg = {v: -k for v, k in value.items()}
        if not (system.add(value, value_const - lo, False) and system.add(neg, hi - value_const, False)):
            return None
    return [(dict(terms), const, eq) for (terms, const), eq in system.rows.items()], system.box


class _System:
    """The constraints in normal form, as an ordered set ``rows`` (key ``(sorted terms, const)``, value: is an
    equality), with the keys each variable occurs in and the equalities with a unit coefficient still to use."""

    def __init__(self, box: Ranges):
        self.box = box
        self.rows: dict[tuple, bool] = {}
        self.uses: dict[str, set[tuple]] = {}
        self.units: list[tuple] = []

    def add(self, coefs: dict[str, int], const: int, eq: bool) -> bool:
        """Add one constraint in its normal form; False when it cannot hold (alone or against a range)."""
        coefs = {v: c for v, c in coefs.items() if c}
        if not coefs:
            return const == 0 if eq else const >= 0
        g = 0
        for c in coefs.values():
            g = gcd(g, c)
        if eq and const % g:
            return False  # the variable part is a multiple of g, -const is not
        coefs, const = {v: c // g for v, c in coefs.items()}, const // g  # (for >=: the floor keeps every point)
        if len(coefs) == 1:
            return self._narrow(*next(iter(coefs.items())), const, eq)
        terms = tuple(sorted(coefs.items()))
        key, opposite = (terms, const), (tuple((v, -c) for v, c in terms), -const)
        if eq and terms[0][1] < 0:
            key, opposite = opposite, key  # one key per equality: its first coefficient positive
        if self.rows.get(key) is True or self.rows.get(opposite) is True or (not eq and key in self.rows):
            return True  # already known (an inequality is implied by its equality)
        if not eq and opposite in self.rows:  # e >= 0 and -e >= 0: e == 0
            self.remove(opposite)
            eq = True
            if terms[0][1] < 0:
                key = opposite
        if key in self.rows:
            self.remove(key)
        self.rows[key] = eq
        for v, _ in key[0]:
            self.uses.setdefault(v, set()).add(key)
        if eq and any(c in (1, -1) for _, c in key[0]):
            self.units.append(key)
        return True

    def remove(self, key: tuple) -> None:
        del self.rows[key]
        for v, _ in key[0]:
            self.uses[v].discard(key)

    def _narrow(self, v: str, c: int, const: int, eq: bool) -> bool:
        """``c*v + const`` (``c`` is 1 or -1 after the gcd) ``== 0`` or ``>= 0``, as ``v``'s range."""
        lo, hi = self.box[v]
        if eq or c > 0:
            lo = max(lo, -const * c)
        if eq or c < 0:
            hi = min(hi, const if c < 0 else -const)
        if lo > hi:
            return False
        self.box[v] = (lo, hi)
        return True
