"""Symbolic dimensions at trace time: tracing a shape family (``x.shape == (N, 512)`` with ``N in 1..65536``).

Modelled on JAX's shape polymorphism (``jax.export.symbolic_shape``): a ``Dim`` is an affine expression over
shape symbols. Python arithmetic on it stays symbolic: ``+``, ``-``, ``*`` by an int, ``//`` and ``%`` by a
positive int, ``math.ceil(N / 128)`` / ``math.floor``; so do comparisons with indices (``rows < N`` is a mask) and
loop trip counts (``nl.affine_range(math.ceil(N / 128))``). A comparison between dimensions is answered when the
declared ranges decide it for the whole family (``N >= 1``), and anything else that needs the value (a Python
``if`` the ranges do not decide, ``nl.arange(N)``, a tile or on-chip shape of ``N``, ``int(N)``) raises
``InconclusiveDimensionError`` naming the dimension and the kernel line, as JAX's
``InconclusiveDimensionOperation`` does. The publisher then declares that dimension concrete.

Non-affine sizes become derived symbols of the kernel's ``SymbolTable`` (``floordiv(N + 127, 128)``), so every
expression the IR holds is affine over symbols (``ir/symbols.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.errors import InconclusiveDimensionError, NkiTraceError
from nki_dsl.ir.affine import Affine, compare
from nki_dsl.ir.symbols import SymbolDef, affine_bounds, ranges, ties
from nki_dsl.trace.builder import caller_loc


@dataclass(frozen=True)
class SymbolDecl:
    """A symbolic dimension of an argument spec: ``nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})``; with
    ``step``, only the multiples of it (``dims={"M": (128, 65536, 128)}``)."""

    name: str
    lo: int
    hi: int
    step: int = 1

    def __str__(self) -> str:
        return self.name


class SymbolTable:
    """The symbols of one family trace: the declared ones, then derived ones in order of first use."""

    def __init__(self):
        self.defs: dict[str, SymbolDef] = {}
        self._derived: dict[tuple, str] = {}
        self._ranges: dict[str, tuple[int, int]] = {}

    def declare(self, decl: SymbolDecl) -> Dim:
        name = f"${decl.name}"
        old = self.defs.get(name)
        new = SymbolDef(name, decl.lo, decl.hi, step=decl.step)
        if old is not None and (old.lo, old.hi, old.step) != (decl.lo, decl.hi, decl.step):
            raise NkiTraceError(f"dimension {decl.name} is declared with two ranges: {old.describe()} and "
                                f"{new.describe()}")  # fmt: skip
        if old is None:
            self.defs[name] = new
            self._ranges = ranges(self.defs)
        return Dim(Affine.var(name), self)

    def dim(self, name: str) -> Dim:
        return Dim(Affine.var(name), self)

    def derive(self, expr: Affine, divisor: int) -> str:
        """The symbol for ``floordiv(expr, divisor)``, made on first use."""
        key = (expr, divisor)
        name = self._derived.get(key)
        if name is None:
            name = f"$_{len(self._derived)}"
            self._derived[key] = name
            self.defs[name] = SymbolDef(name, expr=expr, divisor=divisor)
            self._ranges = ranges(self.defs)
        return name

    def bounds(self, e: Affine) -> tuple[int, int]:
        return affine_bounds(e, self.defs, self._ranges)

    def decide(self, c: Affine) -> bool | None:
        """Whether ``c >= 0`` for every size of the family (True), for none (False), or for some only (None).
        The intervals answer most questions; the rest are integer-set questions with each derived symbol tied to
        its definition (``N - 128*floordiv(N, 128) >= 0`` holds although the intervals alone cannot tell), and each
        stepped symbol to its multiples (``M % 128 == 0`` for ``M in 128..65536 step 128``)."""
        lo, hi = self.bounds(c)
        if lo >= 0 or hi < 0:
            return lo >= 0
        # deferred: `import nki_dsl` does not load the verifier; only a family trace asks this
        from nki_dsl.verify.integer_sets import at_least, has_point

        tied, extra = ties(self.defs)
        tied, box = [at_least(t) for t in tied], self._ranges | extra
        can_fail = has_point(tied + [at_least(-c - 1)], box)
        can_hold = has_point(tied + [at_least(c)], box)
        if can_fail and can_hold:
            return None
        return not can_fail if can_hold else False

    def size(self, e: Affine, what: str) -> str | int:
        """A plain symbol naming the size ``e`` (a derived one unless ``e`` is a symbol itself), or its value when
        every size of the family gives it the same one; a size that may be negative somewhere in the family is
        refused."""
        lo, hi = self.bounds(e)
        if lo == hi:
            return lo
        if lo < 0:
            raise InconclusiveDimensionError(f"{what} {describe(e)} may be negative for some sizes of the family "
                                             f"({self.ranges_text(e)})", caller_loc())  # fmt: skip
        if len(e.terms) == 1 and e.terms[0][1] == 1 and e.const == 0:
            return e.terms[0][0]
        return self.derive(e, 1)

    def ranges_text(self, e: Affine) -> str:
        """The declared ranges of the dimensions ``e`` depends on: ``N in 1..65536``."""
        return ", ".join(self.defs[v].describe() for v in sorted(_roots(e, self)))

    def text(self, e: Affine) -> str:
        """``e`` with the names the kernel knows, derived symbols spelled out as JAX does: ``floordiv(N + 127, 128)``
        rather than ``_0``."""
        names = {}
        for v in e.vars():
            s = self.defs.get(v)
            if s is None or s.is_base:
                names[v] = v[1:]
            else:
                names[v] = f"floordiv({self.text(s.expr)}, {s.divisor})" if s.divisor != 1 else f"({self.text(s.expr)})"
        return str(e.rename(names))


def describe(e: Affine) -> str:
    """An expression over dimensions with the names a publisher wrote (``N + 127``, no ``$``)."""
    return str(e).replace("$", "")


def _int(x) -> int | None:
    if isinstance(x, bool):
        return None
    try:
        return int(x.__index__())
    except (AttributeError, TypeError, NkiTraceError):  # a loop index has no int: `N + i` is the index's to make
        return None


class Dim:
    """A symbolic dimension: an affine expression over shape symbols."""

    __slots__ = ("expr", "table")

    def __init__(self, expr: Affine, table: SymbolTable):
        self.expr = expr
        self.table = table

    # -- what the kernel may do ---------------------------------------------------------------------------------
    def _lift(self, other) -> Affine | None:
        if isinstance(other, Dim):
            return other.expr
        k = _int(other)
        return None if k is None else Affine((), k)

    def __add__(self, other):
        o = self._lift(other)
        return NotImplemented if o is None else Dim(self.expr + o, self.table)

    __radd__ = __add__

    def __sub__(self, other):
        o = self._lift(other)
        return NotImplemented if o is None else Dim(self.expr - o, self.table)

    def __rsub__(self, other):
        o = self._lift(other)
        return NotImplemented if o is None else Dim(o - self.expr, self.table)

    def __neg__(self):
        return Dim(-self.expr, self.table)

    def __pos__(self):
        return self

    def __mul__(self, other):
        if isinstance(other, Dim):
            raise self._inconclusive(f"the product {self} * {other} of two dimensions is not affine")
        k = _int(other)
        return NotImplemented if k is None else Dim(self.expr * k, self.table)

    __rmul__ = __mul__

    def _divisor(self, other, op: str) -> int:
        k = _int(other)
        if k is None or k <= 0:
            raise self._inconclusive(f"{self} {op} {other!r} needs a positive int divisor")
        return k

    def __floordiv__(self, other):
        if not isinstance(other, Dim) and _int(other) is None:
            return NotImplemented
        k = self._divisor(other, "//")
        return Dim(Affine.var(self.table.derive(self.expr, k)), self.table) if k != 1 else self

    def __mod__(self, other):
        if not isinstance(other, Dim) and _int(other) is None:
            return NotImplemented
        k = self._divisor(other, "%")
        return self - (self // k) * k

    def __divmod__(self, other):
        if not isinstance(other, Dim) and _int(other) is None:
            return NotImplemented
        return self // other, self % other

    def __rfloordiv__(self, other):
        raise self._inconclusive(f"{other!r} // {self} divides by a dimension")

    __rmod__ = __rdivmod__ = __rfloordiv__

    def __truediv__(self, other):
        if isinstance(other, Dim):
            raise self._inconclusive(f"{self} / {other} divides by a dimension")
        k = _int(other)
        if k is None:
            raise self._inconclusive(f"{self} / {other!r}: a dimension divides only by a positive int")
        return DimRatio(self, self._divisor(k, "/"))

    def __rtruediv__(self, other):
        raise self._inconclusive(f"{other!r} / {self} divides by a dimension")

    # -- comparisons: decided by the declared ranges, or refused -------------------------------------------------
    def _decide(self, other, op: str):
        o = self._lift(other)
        if o is None:
            return NotImplemented
        results = []
        for c in compare(self.expr, op, o).constraints:
            holds = self.table.decide(c)
            if holds is not None:
                results.append(holds)
            else:
                rhs = self.table.text(o) if isinstance(other, Dim) else str(o.const)
                raise self._inconclusive(f"the comparison {self} {op} {rhs} is true for some sizes of the family and "
                                         f"false for others")  # fmt: skip
        return all(results)

    def __lt__(self, other):
        return self._decide(other, "<")

    def __le__(self, other):
        return self._decide(other, "<=")

    def __gt__(self, other):
        return self._decide(other, ">")

    def __ge__(self, other):
        return self._decide(other, ">=")

    def __eq__(self, other):
        if isinstance(other, bool) or (not isinstance(other, Dim) and _int(other) is None):
            return False
        return self._decide(other, "==")

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self.expr)

    def __bool__(self):
        return self._decide(0, ">")  # a size is nonzero when every size of the family is

    # -- what needs a concrete value ------------------------------------------------------------------------------
    def _inconclusive(self, what: str) -> InconclusiveDimensionError:
        return InconclusiveDimensionError(
            f"{what}; dimension {self._names()} is symbolic ({self.table.ranges_text(self.expr)}) in this shape "
            f"family. Declare it concrete in the manifest (a fixed size in args, no range), or keep the kernel "
            f"affine in it (masks, loop trip counts, HBM shapes)",
            caller_loc(),
        )

    def _names(self) -> str:
        base = sorted({v[1:] for v in _roots(self.expr, self.table)})
        return ", ".join(base) or describe(self.expr)

    def concrete(self) -> int | None:
        """The value, when the declared ranges leave one (``ceil(M / 128)`` for ``M in 1..128`` is 1 in every
        instance): a family split at a kernel's decision points (``M in 1..128``, ``M in 129..256``) traces those
        decisions concretely, as a concrete trace does."""
        lo, hi = self.table.bounds(self.expr)
        return lo if lo == hi else None

    def __index__(self):
        v = self.concrete()
        if v is None:
            raise self._inconclusive(f"dimension {self} is used where a concrete Python int is needed")
        return v

    def __int__(self):
        v = self.concrete()
        if v is None:
            raise self._inconclusive(f"int({self}) needs a concrete value")
        return v

    def __float__(self):
        v = self.concrete()
        if v is None:
            raise self._inconclusive(f"float({self}) needs a concrete value")
        return float(v)

    def __str__(self) -> str:
        return self.table.text(self.expr)

    def __repr__(self) -> str:
        return f"Dim({self})"


def _roots(e: Affine, table: SymbolTable) -> set[str]:
    """The declared (base) symbols an expression depends on."""
    out: set[str] = set()
    todo = list(e.vars())
    while todo:
        v = todo.pop()
        s = table.defs.get(v)
        if s is None:
            continue
        if s.is_base:
            out.add(v)
        else:
            todo.extend(s.expr.vars())
    return out


class DimRatio:
    """``N / k``: only ``math.ceil`` / ``math.floor`` / ``int()`` of it (for sizes >= 0) make a dimension again."""

    __slots__ = ("dim", "k")

    def __init__(self, dim: Dim, k: int):
        self.dim, self.k = dim, k

    def __ceil__(self):
        return (self.dim + (self.k - 1)) // self.k

    def __floor__(self):
        return self.dim // self.k

    def __trunc__(self):
        lo, _ = self.dim.table.bounds(self.dim.expr)
        if lo < 0:
            raise self.dim._inconclusive(f"int({self}) rounds towards zero, and {self.dim} may be negative")
        return self.dim // self.k

    def __str__(self) -> str:
        return f"{self.dim} / {self.k}"

    def _refuse(self, *_):
        raise self.dim._inconclusive(f"{self} is a fraction of a dimension; only math.ceil / math.floor of it "
                                     f"are dimensions")  # fmt: skip

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __index__ = __float__ = __int__ = __bool__ = __round__ = _refuse
