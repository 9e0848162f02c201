"""Can a system of linear constraints have an integer point in a box? Fourier-Motzkin elimination, a fast "no".

The family prover (``verify/family.py``) asks whether some point of a family breaks a rule. Every row this
elimination derives is a nonnegative combination of the given ones, so every integer point meeting the given
constraints meets it too; a row left with no variables and a negative constant therefore proves there is no such
point: a "no" here is a proof. A "yes" (or giving up) proves nothing,
and the caller asks the exact integer question (``integer_sets.has_point``), which is slower on the coupled
constraints a family has (``N`` tied to ``ceil(N / 128)`` tied to a loop index).

Each elimination replaces the constraints on one variable by every pairwise combination of a lower and an upper
bound on it, in integers (no fractions: ``a*p + b*n`` with positive multipliers, divided by their gcd). The count
can grow quadratically per step, so past ``MAX_CONSTRAINTS`` the answer is "maybe" (``True``).
"""

from __future__ import annotations

from math import gcd

MAX_CONSTRAINTS = 4000

Row = tuple[dict[str, int], int]  # sum(coef * var) + const >= 0


def may_have_point(constraints: list[tuple[dict[str, int], int, bool]], ranges: dict[str, tuple[int, int]]) -> bool:
    """``constraints`` as ``integer_sets`` builds them (``(coefs, const, is_equality)``); False only when no
    integer point of the box meets them all."""
    rows: list[Row] = []
    for coefs, const, eq in constraints:
        rows.append((dict(coefs), const))
        if eq:
            rows.append(({v: -c for v, c in coefs.items()}, -const))
    for v, (lo, hi) in ranges.items():
        rows += [({v: 1}, -lo), ({v: -1}, hi)]
    variables = sorted({v for coefs, _ in rows for v in coefs})
    for v in variables:
        pos = [r for r in rows if r[0].get(v, 0) > 0]
        neg = [r for r in rows if r[0].get(v, 0) < 0]
        rest = [r for r in rows if r[0].get(v, 0) == 0]
        if len(rest) + len(pos) * len(neg) > MAX_CONSTRAINTS:
            return True
        for p in pos:
            for n in neg:
                rest.append(_combine(p, n, v))
        rows = []
        for coefs, const in rest:
            if not coefs:
                if const < 0:
                    return False
                continue
            rows.append((coefs, const))
    return all(const >= 0 for _, const in rows)


def _combine(p: Row, n: Row, v: str) -> Row:
    a, b = p[0][v], -n[0][v]
    coefs: dict[str, int] = {}
    for row, k in ((p, b), (n, a)):
        for x, c in row[0].items():
            coefs[x] = coefs.get(x, 0) + k * c
    coefs = {x: c for x, c in coefs.items() if c}
    const = b * p[1] + a * n[1]
    g = 0
    for c in coefs.values():
        g = gcd(g, c)
    if g > 1:  # integer points make the variable part a multiple of g: flooring const / g keeps every one of them
        coefs = {x: c // g for x, c in coefs.items()}
        const = const // g
    return coefs, const
