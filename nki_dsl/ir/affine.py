"""Affine index expressions and masks: the symbolic integers of the IR.

An ``Affine`` is ``const + sum(coef * var)`` over named integer variables. Variable names are reserved by kind:

* ``i<N>``  loop indices (bound by an enclosing ``Loop``),
* ``pid<N>`` SPMD program ids (range ``[0, grid[N])``),
* ``d<N>``   the axes of the access or op they appear in (range ``[0, extent)``),
* ``$<name>`` shape symbols of a shape family (``ir/symbols.py``): a size known only when a call binds it, with
  a declared range. Only family IR holds them; instantiation replaces every one by its value.

A ``Mask`` is a conjunction of constraints ``expr >= 0``; every comparison is normalised to that form (integer
``a < b`` is ``b - a - 1 >= 0``), so equal masks are equal objects and print identically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ASCII digits only, matched in full: variable names reach generated Python as identifiers, and Python folds
# other digits (NFKC: fullwidth "３" is "3"), so "i３" and "i3" would be one variable there and two here.
# No leading zeros: "d00" would be a second name for axis 0.
_VAR_RE = re.compile(r"(i|pid|d)(0|[1-9][0-9]*)")
# Shape symbols: ASCII identifiers after a '$' that no other variable name has, so family IR can never be read as
# concrete IR (and the other way round).
SYMBOL_RE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]{0,63}")


def var_kind(name: str) -> str:
    """``"loop"``, ``"pid"``, ``"axis"`` or ``"sym"`` for a variable name."""
    m = _VAR_RE.fullmatch(name) if isinstance(name, str) else None
    if not m and isinstance(name, str) and SYMBOL_RE.fullmatch(name):
        return "sym"
    if not m:
        raise ValueError(f"bad variable name {name!r}")
    return {"i": "loop", "pid": "pid", "d": "axis"}[m.group(1)]


def var_number(name: str) -> int:
    return int(_VAR_RE.fullmatch(name).group(2))


@dataclass(frozen=True)
class Affine:
    """``const + sum(coef * var)``. ``terms`` is sorted by variable name with no zero coefficients."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(const: int = 0, **coefs: int) -> Affine:
        return Affine(_canon(coefs.items()), int(const))

    @staticmethod
    def var(name: str, coef: int = 1) -> Affine:
        return Affine(((name, coef),) if coef else (), 0)

    @property
    def coefs(self) -> dict[str, int]:
        return dict(self.terms)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def vars(self) -> set[str]:
        return {v for v, _ in self.terms}

    def coef(self, name: str) -> int:
        for v, c in self.terms:
            if v == name:
                return c
        return 0

    def __add__(self, other: Affine | int) -> Affine:
        other = _lift(other)
        merged = dict(self.terms)
        for v, c in other.terms:
            merged[v] = merged.get(v, 0) + c
        return Affine(_canon(merged.items()), self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Affine:
        return self * -1

    def __sub__(self, other: Affine | int) -> Affine:
        return self + (-_lift(other))

    def __rsub__(self, other: Affine | int) -> Affine:
        return _lift(other) - self

    def __mul__(self, k: int) -> Affine:
        k = int(k)
        return Affine(_canon((v, c * k) for v, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def rename(self, mapping: dict[str, str]) -> Affine:
        return Affine(_canon((mapping.get(v, v), c) for v, c in self.terms), self.const)

    def substitute(self, env: dict[str, Affine | int]) -> Affine:
        """Replace variables by expressions (variables missing from ``env`` stay)."""
        out = Affine((), self.const)
        for v, c in self.terms:
            out = out + (_lift(env[v]) * c if v in env else Affine.var(v, c))
        return out

    def evaluate(self, env: dict[str, int]) -> int:
        return self.const + sum(c * env[v] for v, c in self.terms)

    def bounds(self, ranges: dict[str, tuple[int, int]]) -> tuple[int, int]:
        """Smallest and largest value over variables ranging over the inclusive ``ranges``."""
        lo = hi = self.const
        for v, c in self.terms:
            a, b = ranges[v]
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        return lo, hi

    def __str__(self) -> str:
        return format_affine(self)


def _lift(x: Affine | int) -> Affine:
    if isinstance(x, Affine):
        return x
    return Affine((), int(x))


def _canon(items) -> tuple[tuple[str, int], ...]:
    merged: dict[str, int] = {}
    for v, c in items:
        merged[v] = merged.get(v, 0) + int(c)
    return tuple(sorted((v, c) for v, c in merged.items() if c != 0))


def format_affine(a: Affine) -> str:
    """Canonical text: terms in name order as ``c*v``, then the constant, e.g. ``128*i0 + d0 - 1``."""
    parts: list[str] = []
    for v, c in a.terms:
        mag = abs(c)
        term = v if mag == 1 else f"{mag}*{v}"
        if not parts:
            parts.append(term if c > 0 else f"-{term}")
        else:
            parts.append(f"+ {term}" if c > 0 else f"- {term}")
    if a.const or not parts:
        if not parts:
            parts.append(str(a.const))
        else:
            parts.append(f"+ {a.const}" if a.const > 0 else f"- {-a.const}")
    return " ".join(parts)


@dataclass(frozen=True)
class Mask:
    """A conjunction of ``expr >= 0`` constraints, sorted and without duplicates."""

    constraints: tuple[Affine, ...]

    @staticmethod
    def of(*constraints: Affine) -> Mask:
        return Mask(tuple(sorted(set(constraints), key=format_affine)))

    def __and__(self, other: Mask) -> Mask:
        return Mask.of(*self.constraints, *other.constraints)

    def vars(self) -> set[str]:
        return set().union(*(c.vars() for c in self.constraints)) if self.constraints else set()

    def rename(self, mapping: dict[str, str]) -> Mask:
        return Mask.of(*(c.rename(mapping) for c in self.constraints))

    def substitute(self, env: dict[str, Affine | int]) -> Mask:
        return Mask.of(*(c.substitute(env) for c in self.constraints))

    def __str__(self) -> str:
        return " & ".join(format_constraint(c) for c in self.constraints)


def format_constraint(c: Affine) -> str:
    """``e >= 0`` printed readably: ``lhs >= k`` or, when the leading coefficient is negative, ``lhs <= k``."""
    if c.terms and c.terms[0][1] < 0:
        lhs = Affine(tuple((v, -k) for v, k in c.terms), 0)
        return f"{format_affine(lhs)} <= {c.const}"
    lhs = Affine(c.terms, 0)
    return f"{format_affine(lhs)} >= {-c.const}"


def compare(lhs: Affine, op: str, rhs: Affine) -> Mask:
    """Normalise an integer comparison between affine expressions into a ``Mask``."""
    diff = lhs - rhs
    if op == ">=":
        return Mask.of(diff)
    if op == ">":
        return Mask.of(diff - 1)
    if op == "<=":
        return Mask.of(-diff)
    if op == "<":
        return Mask.of(-diff - 1)
    if op == "==":
        return Mask.of(diff, -diff)
    raise ValueError(f"unsupported comparison {op!r} in a mask; use <, <=, >, >=, ==")
