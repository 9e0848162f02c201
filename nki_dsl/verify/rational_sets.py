"""Can a system of linear constraints have an integer point in a box? Fourier-Motzkin elimination, a fast "no".

The family prover (``verify/family.py``) asks whether some point of a family breaks a rule. Every row this
elimination derives is a nonnegative combination of the given ones, so every integer point meeting the given
constraints meets it too; a row left with no variables and a negative constant therefore proves there is no such
point: a "no" here is a proof. A "yes" (or giving up) proves nothing,
and the caller asks the exact integer question (``integer_sets.has_point``), which is slower on the coupled
constraints a family has (``N`` tied to ``ceil(N / 128)`` tied to a loop index).

Each elimination replaces the constraints on one variable (the one that adds the fewest rows) by every pairwise
combination of a lower and an upper bound on it, in integers (no fractions: ``a*p + b*n`` with positive
multipliers, divided by their gcd). The count can grow quadratically per step, so past ``MAX_CONSTRAINTS`` the
answer is "maybe" (``True``).
"""

from __future__ import annotations

from math import gcd

MAX_CONSTRAINTS = 4000

Row = tuple[dict[str, int], int]  # sum(coef * var) + const >= 0


def may_have_point(constraints: list[tuple[dict[str, int], int, bool]], ranges: dict[str, tuple[int, int]],
                   charge=None) -> bool:  # fmt: skip
    """``constraints`` as ``integer_sets`` builds them (``(coefs, const, is_equality)``); False only when no
    integer point of the box meets them all. ``charge.spend(n)`` (``integer_sets.Work``), if given, is told the
    rows each elimination reads and builds."""
    rows: list[Row] = []
    for coefs, const, eq in constraints:
        rows.append((dict(coefs), const))
        if eq:
            rows.append(({v: -c for v, c in coefs.items()}, -const))
    for v, (lo, hi) in ranges.items():
        rows += [({v: 1}, -lo), ({v: -1}, hi)]
    variables = {v for coefs, _ in rows for v in coefs}
    while variables:
        v = _cheapest(rows, variables)
        variables.discard(v)
        pos = [r for r in rows if r[0].get(v, 0) > 0]
        neg = [r for r in rows if r[0].get(v, 0) < 0]
        rest = [r for r in rows if r[0].get(v, 0) == 0]
        gives_up = len(rest) + len(pos) * len(neg) > MAX_CONSTRAINTS
        if charge is not None:  # the rows read, and the combinations built unless it gives up
            charge.spend(len(rows) + (0 if gives_up else len(pos) * len(neg)))
        if gives_up:
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


def _cheapest(rows: list[Row], variables: set[str]) -> str:
    """The variable whose elimination adds the fewest rows (``pos * neg - pos - neg``; ties by name): a size
    symbol defined over ``N`` and used nowhere else goes first, at no cost, where the names' order would eliminate
    ``N`` first, with every such symbol's rows on both sides (100 of them made 40,000 rows, past the bound)."""
    pos = dict.fromkeys(variables, 0)
    neg = dict.fromkeys(variables, 0)
    for coefs, _ in rows:
        for x, c in coefs.items():
            if x in variables:
                if c > 0:
                    pos[x] += 1
                else:
                    neg[x] += 1
    return min(sorted(variables), key=lambda x: pos[x] * neg[x] - pos[x] - neg[x])


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
