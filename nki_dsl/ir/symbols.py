"""Shape symbols: the named sizes of a shape family, and what a concrete call gives them.

A shape family (a Hub kernel published for ``N x 512`` with ``N in 1..65536``, in the spirit of JAX's
``jax.export.symbolic_shape``) is one kernel IR whose sizes may be symbols instead of integers. A symbol is

* a *base* symbol with an inclusive declared range (``symbol $N in [1, 65536]``), bound from a call's array
  shapes, optionally constrained to the multiples of a step (``symbol $M in [128, 65536] step 128``: a launcher
  that accepts only whole 128-row tiles; ``M = 128*b`` in ``jax.export``'s terms), or
* a *derived* symbol, ``floordiv(expr, k)`` of an affine expression over earlier symbols (``k == 1`` is the
  affine expression itself): ``math.ceil(N / 128)`` is ``symbol $_0 = ($N + 127) // 128``.

Every size the family needs is a plain symbol (a tensor dimension, a loop's stop); index arithmetic on sizes stays
affine over symbols inside masks (``d0 + 128*i0 - $N <= -1``). So a family's whole non-affine part is the list
of derived symbols, each an exact integer function of the base symbols, and each bounded by interval arithmetic
(``ranges``): the verifier's proofs over a family (``verify/family.py``) and the loader's binding
(``bind``) both read this table and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.affine import SYMBOL_RE, Affine, format_affine, var_kind

MAX_SYMBOL_VALUE = 1 << 40  # a bound on declared ranges, far above any size a budget lets run (ir/budget.py)
# A bound on every value a derived symbol (and the expression it divides) takes over the family: a chain of
# products would otherwise grow without limit (200 symbols of 10**18 * the previous one make numbers of 3,600
# digits, past what Python prints, and a proof that never ends). Far above any size a budget lets run, and inside
# int64, so every backend holds it exactly.
MAX_DERIVED_VALUE = 1 << 62


class SymbolError(ValueError):
    """A symbol table, or a binding of it, that means nothing valid (callers turn it into their own error)."""


@dataclass(frozen=True)
class SymbolDef:
    """``name`` is ``$<identifier>``. A base symbol has ``lo..hi`` (the multiples of ``step`` in it; ``lo`` and
    ``hi`` are multiples themselves) and no ``expr``; a derived one is ``floordiv(expr, divisor)`` over earlier
    symbols."""

    name: str
    lo: int = 0
    hi: int = 0
    expr: Affine | None = None
    divisor: int = 1
    step: int = 1

    @property
    def is_base(self) -> bool:
        return self.expr is None

    @property
    def label(self) -> str:
        """The name as a publisher wrote it (``N`` for ``$N``)."""
        return self.name[1:]

    def describe(self) -> str:
        if self.is_base:
            return f"{self.label} in {self.lo}..{self.hi}" + (f" step {self.step}" if self.step != 1 else "")
        return f"{self.label} = {format_definition(self).replace('$', '')}"  # as a publisher names them


def format_definition(s: SymbolDef) -> str:
    """``$N + 127`` for an affine definition, ``($N + 127) // 128`` for a floor division."""
    text = format_affine(s.expr)
    return text if s.divisor == 1 else f"({text}) // {s.divisor}"


def is_symbol(value) -> bool:
    """A size that is a symbol name rather than an int (tensor dimensions and loop stops of family IR)."""
    return isinstance(value, str)


def check_table(symbols: dict[str, SymbolDef]) -> None:
    """Every entry well formed against the ones before it (``check_symbol``)."""
    intervals: dict[str, tuple[int, int]] = {}
    for name, s in symbols.items():
        if name != s.name:
            raise SymbolError(f"{name!r} is not a symbol name ($ and an identifier)")
        check_symbol(s, intervals, intervals)


def check_symbol(s: SymbolDef, earlier, intervals: dict[str, tuple[int, int]] | None = None) -> None:
    """Name well formed, a base range inside ``0..MAX_SYMBOL_VALUE``, a derived symbol defined over ``earlier``
    symbol names with a positive divisor. One entry at a time, so a reader checking each line as it comes does
    linear work in the table's length. With ``intervals`` (every earlier symbol's, as ``ranges`` gives them), a
    derived symbol's definition must stay within ``MAX_DERIVED_VALUE`` in magnitude, and its interval is added."""
    _check_symbol(s, earlier)
    if intervals is None:
        return
    if s.is_base:
        intervals[s.name] = (s.lo, s.hi)
        return
    lo, hi = s.expr.bounds(intervals)  # (the plain bounds: affine_bounds only narrows them)
    if not -MAX_DERIVED_VALUE <= lo <= hi <= MAX_DERIVED_VALUE:
        raise SymbolError(f"symbol {s.label}: its definition {format_definition(s).replace('$', '')} may reach "
                          f"{short_int(lo if -lo > hi else hi)} over the family's ranges, past the bound "
                          f"{MAX_DERIVED_VALUE} (2**62) on a dimension's value")  # fmt: skip
    intervals[s.name] = (lo // s.divisor, hi // s.divisor)


def short_int(n: int) -> str:
    """An integer for a message: whole up to 30 digits, else its sign, leading digits and length (a huge one
    must not be printed whole, and Python refuses to print past 4,300 digits)."""
    if abs(n) < 10**30:
        return str(n)
    digits = n.bit_length() * 30103 // 100000 + 1  # log10(2) ~ 0.30103: the digit count within one
    return f"{'-' if n < 0 else ''}~10**{digits - 1}"


def _check_symbol(s: SymbolDef, earlier) -> None:
    if not SYMBOL_RE.fullmatch(s.name):
        raise SymbolError(f"{s.name!r} is not a symbol name ($ and an identifier)")
    if s.is_base:
        if not (isinstance(s.lo, int) and isinstance(s.hi, int) and 0 <= s.lo <= s.hi <= MAX_SYMBOL_VALUE):
            raise SymbolError(f"symbol {s.label}: range {s.lo}..{s.hi} is not inside 0..{MAX_SYMBOL_VALUE}")
        if not (isinstance(s.step, int) and 1 <= s.step <= MAX_SYMBOL_VALUE):
            raise SymbolError(f"symbol {s.label}: the step {s.step} is not an integer in 1..{MAX_SYMBOL_VALUE}")
        if s.lo % s.step or s.hi % s.step:
            raise SymbolError(f"symbol {s.label}: range {s.lo}..{s.hi} does not start and end at multiples of its "
                              f"step {s.step}")  # fmt: skip
        return
    if s.step != 1:
        raise SymbolError(f"symbol {s.label}: only a declared (base) symbol has a step")
    if not isinstance(s.divisor, int) or s.divisor < 1:
        raise SymbolError(f"symbol {s.label}: the divisor {s.divisor} is not a positive integer")
    for v in s.expr.vars():
        if var_kind(v) != "sym" or v not in earlier:
            raise SymbolError(f"symbol {s.label} is defined over {v}, which is not an earlier symbol")


def ranges(symbols: dict[str, SymbolDef]) -> dict[str, tuple[int, int]]:
    """An inclusive interval holding every value each symbol takes over the family: base symbols their declared
    range, derived ones by interval arithmetic (an affine expression's bounds are at its variables' ends, and
    floor division by a positive ``k`` is nondecreasing, so it maps an interval's ends to its image's ends)."""
    out: dict[str, tuple[int, int]] = {}
    for name, s in symbols.items():
        if s.is_base:
            out[name] = (s.lo, s.hi)
        else:
            lo, hi = affine_bounds(s.expr, symbols, out)
            out[name] = (lo // s.divisor, hi // s.divisor)
    return out


def affine_bounds(e: Affine, symbols: dict[str, SymbolDef], intervals: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Bounds of ``e`` over the intervals, tightened by what a floor division means: a remainder ``f - k*q`` with
    ``q = floordiv(f, k)`` is in ``0..k-1`` (``n % 16`` of a family is ``n - 16*floordiv(n, 16)``, whose intervals
    alone go negative). For each such ``q`` in ``e`` with a multiple of ``k`` as coefficient, ``e`` is
    ``rest + a*(f - k*q)`` and its bounds are those of ``rest`` plus ``a * (0..k-1)``, intersected with the plain
    ones (each is sound, so both hold)."""
    lo, hi = e.bounds(intervals)
    for v, c in e.terms:
        s = symbols.get(v)
        if s is None or s.is_base or s.divisor == 1 or c % s.divisor:
            continue
        a = -c // s.divisor
        rest = e - (s.expr - Affine.var(v, s.divisor)) * a
        r_lo, r_hi = rest.bounds(intervals)
        lo, hi = max(lo, r_lo + min(0, a * (s.divisor - 1))), min(hi, r_hi + max(0, a * (s.divisor - 1)))
    return lo, hi


def evaluate(symbols: dict[str, SymbolDef], base: dict[str, int]) -> dict[str, int]:
    """Every symbol's value from the base symbols' values (which must be inside their ranges)."""
    values: dict[str, int] = {}
    for name, s in symbols.items():
        if s.is_base:
            if name not in base:
                raise SymbolError(f"no value for dimension {s.label}")
            v = base[name]
            if not (isinstance(v, int) and s.lo <= v <= s.hi):
                raise SymbolError(f"dimension {s.label} = {v} is outside the family's range {s.lo}..{s.hi}")
            if v % s.step:
                raise SymbolError(f"dimension {s.label} = {v} is not a multiple of {s.step} (the family's "
                                  f"{s.describe()})")  # fmt: skip
            values[name] = v
        else:
            values[name] = s.expr.evaluate(values) // s.divisor
    return values


def definition_constraints(s: SymbolDef) -> list[Affine]:
    """``s = floordiv(e, k)`` as linear constraints ``>= 0`` over the symbols: ``e - k*s >= 0`` and
    ``k*s + k - 1 - e >= 0`` (for ``k == 1`` the two make ``s == e``)."""
    me = Affine.var(s.name, s.divisor)
    return [s.expr - me, me + (s.divisor - 1) - s.expr]


def ties(symbols: dict[str, SymbolDef]) -> tuple[list[Affine], dict[str, tuple[int, int]]]:
    """What ties the symbols together beyond their intervals, as linear constraints ``>= 0`` and the boxes of the
    extra variables they use: each derived symbol's definition (``definition_constraints``), and each stepped
    symbol's divisibility, ``$M == step * $M.q`` for an integer ``$M.q`` in ``lo/step .. hi/step`` (a name no
    symbol can have, so it cannot meet one)."""
    out: list[Affine] = []
    box: dict[str, tuple[int, int]] = {}
    for s in symbols.values():
        if not s.is_base:
            out += definition_constraints(s)
        elif s.step != 1:
            q = f"{s.name}.q"
            box[q] = (s.lo // s.step, s.hi // s.step)
            diff = Affine.var(s.name) - Affine.var(q, s.step)
            out += [diff, -diff]
    return out, box


def bind(symbols: dict[str, SymbolDef], pattern: tuple, shape: tuple[int, ...], where: str) -> dict[str, int]:
    """Base symbol values from matching one parameter's declared shape (ints and symbol names) to a call's array
    shape. Derived symbols in a parameter shape are checked by ``check_bound`` after every base is known."""
    if len(pattern) != len(shape):
        raise SymbolError(f"{where}: rank {len(shape)} does not match the family's {len(pattern)}")
    found: dict[str, int] = {}
    for k, (p, n) in enumerate(zip(pattern, shape)):
        if is_symbol(p):
            s = symbols.get(p)
            if s is not None and s.is_base and found.setdefault(p, n) != n:
                raise SymbolError(f"{where}: dimension {s.label} is {found[p]} and {n} in one call")
        elif p != n:
            raise SymbolError(f"{where}: dimension {k} is {n}, the family's is {p}")
    return found


def check_bound(values: dict[str, int], pattern: tuple, shape: tuple[int, ...], where: str) -> None:
    """Every dimension of the pattern, derived symbols included, equals the array's under ``values``."""
    for k, (p, n) in enumerate(zip(pattern, shape)):
        if is_symbol(p) and values[p] != n:
            raise SymbolError(f"{where}: dimension {k} is {n}, but the family makes it {p[1:]} = {values[p]}")
