"""Symbolic indices at trace time: ``nl.arange``, ``nl.mgrid``, loop indices, program ids and masks.

An ``IndexValue`` is an affine expression whose axis variables ``d<k>`` name the axes of its own broadcast
``shape`` (``nl.arange(128)[:, None]`` is ``d0`` with shape ``(128, 1)``); loop indices and program ids are
scalars (shape ``()``). Arithmetic broadcasts like NumPy, right-aligned. Comparisons build ``MaskValue``s, which
are predicates known at compile time; using either as a Python bool is an error, because the body is traced once.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from nki_dsl.errors import NkiTraceError
from nki_dsl.ir.affine import Affine, Mask, compare, var_kind, var_number
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.symbolic import Dim

# A front end whose loops are unrolled when their index must be a Python int (the current NKI API, whose compiler
# unrolls every loop at specialisation: nki_dsl/current/specialize.py) installs a hook called with the variables of
# a symbolic index about to be refused as a Python int or bool; the hook raises to retrace with those loops
# unrolled. Legacy kernels install none and get the errors below.
concrete_index_hook: contextvars.ContextVar = contextvars.ContextVar("nki_concrete_index_hook", default=None)


def _needs_concrete(variables) -> None:
    hook = concrete_index_hook.get()
    if hook is not None:
        hook(set(variables))


def _align(expr: Affine, own_ndim: int, ndim: int) -> Affine:
    """Rename axis vars of an expression with ``own_ndim`` axes for a right-aligned broadcast to ``ndim``."""
    shift = ndim - own_ndim
    if shift == 0:
        return expr
    return expr.rename({v: f"d{var_number(v) + shift}" for v in expr.vars() if var_kind(v) == "axis"})


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, e in enumerate((1,) * (ndim - len(s)) + tuple(s)):
            if e != 1 and out[k] not in (1, e):
                raise NkiTraceError(
                    f"index shapes {', '.join(str(list(x)) for x in shapes)} do not broadcast", caller_loc()
                )
            if e != 1:
                out[k] = e
    return tuple(out)


class IndexValue:
    __slots__ = ("expr", "shape")
    __array_priority__ = 1000  # keep NumPy scalars from swallowing the arithmetic

    def __init__(self, expr: Affine, shape: tuple[int, ...] = ()):
        self.expr = expr
        self.shape = tuple(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def aligned(self, ndim: int) -> Affine:
        return _align(self.expr, self.ndim, ndim)

    def broadcast(self, shape: tuple[int, ...]) -> Affine:
        """The expression aligned to ``shape``, with each axis this index has only one position on (extent 1)
        pinned to that position (0) where ``shape`` is wider: NumPy broadcasting repeats the one value along the
        axis (``nl.arange(1)[None, :]`` beside ``nl.arange(64)[None, :]`` is 0 in every column, not the column)."""
        expr = self.aligned(len(shape))
        own = (1,) * (len(shape) - self.ndim) + self.shape
        pinned = {f"d{k}": 0 for k, (e, n) in enumerate(zip(own, shape)) if e == 1 and n != 1}
        return expr.substitute(pinned) if pinned and expr.vars() & pinned.keys() else expr

    # -- arithmetic ------------------------------------------------------------------------------------------
    def _combine(self, other, sign: int) -> IndexValue:
        other = as_index(other)
        if other is NotImplemented:
            return NotImplemented
        shape = broadcast_shapes(self.shape, other.shape)
        return IndexValue(self.broadcast(shape) + other.broadcast(shape) * sign, shape)

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return (-self)._combine(other, 1)

    def __neg__(self):
        return IndexValue(-self.expr, self.shape)

    def __mul__(self, k):
        if isinstance(k, IndexValue):
            _needs_concrete(self.expr.vars() | k.expr.vars())
        k = _static_int(k, "multiply an index by")
        return IndexValue(self.expr * k, self.shape)

    __rmul__ = __mul__

    def __floordiv__(self, k):
        k = _static_int(k, "divide an index by")
        if self.expr.const % k or any(c % k for _, c in self.expr.terms):
            _needs_concrete(self.expr.vars())
            raise NkiTraceError(
                f"index {self.expr} // {k} is not affine; only exact division of every coefficient is allowed",
                caller_loc(),
            )
        return IndexValue(Affine(tuple((v, c // k) for v, c in self.expr.terms), self.expr.const // k), self.shape)

    # -- shape manipulation (``[:, None]``) -------------------------------------------------------------------
    def __setitem__(self, key, value) -> None:
        # NKI: index tensors are not assignable (reference/nki.md §1.3)
        raise NkiTraceError(
            "an index (nl.arange, nl.mgrid, a loop variable) cannot be assigned to: it is a symbolic expression, not "
            "data; materialise it as a tile with nisa.iota and write the tile",
            caller_loc(),
        )

    def __getitem__(self, key) -> IndexValue:
        key = key if isinstance(key, tuple) else (key,)
        mapping: dict[str, str] = {}
        shape: list[int] = []
        src = 0
        for k in key:
            if k is None:
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                if src >= self.ndim:
                    raise NkiTraceError(f"too many ':' in an index of rank {self.ndim}", caller_loc())
                mapping[f"d{src}"] = f"d{len(shape)}"
                shape.append(self.shape[src])
                src += 1
            else:
                raise NkiTraceError("an index can only be reshaped with ':' and None, as in [:, None]", caller_loc())
        if src != self.ndim:
            raise NkiTraceError(f"index of rank {self.ndim} reshaped with {len(key)} entries", caller_loc())
        return IndexValue(self.expr.rename(mapping), tuple(shape))

    # -- comparisons build masks ------------------------------------------------------------------------------
    def _cmp(self, other, op: str) -> MaskValue:
        other = as_index(other)
        if other is NotImplemented:
            return NotImplemented
        shape = broadcast_shapes(self.shape, other.shape)
        return MaskValue(compare(self.broadcast(shape), op, other.broadcast(shape)), shape)

    def __lt__(self, other):
        return self._cmp(other, "<")

    def __le__(self, other):
        return self._cmp(other, "<=")

    def __gt__(self, other):
        return self._cmp(other, ">")

    def __ge__(self, other):
        return self._cmp(other, ">=")

    def __eq__(self, other):  # type: ignore[override]
        return self._cmp(other, "==")

    __hash__ = None  # type: ignore[assignment]

    def __mod__(self, k):
        _needs_concrete(self.expr.vars())
        raise NkiTraceError(f"index {self.expr} % {k!r} is not affine (use nl.static_range to unroll)", caller_loc())

    def __bool__(self):
        _needs_concrete(self.expr.vars())
        raise NkiTraceError(
            "an index (loop variable, nl.arange or program id) cannot decide Python control flow: the loop body "
            "is traced once; use a mask=, nl.static_range, or a Python int",
            caller_loc(),
        )

    def __index__(self):
        _needs_concrete(self.expr.vars())
        raise NkiTraceError(
            f"index {self.expr} is symbolic and has no Python int value (use nl.static_range to unroll)",
            caller_loc(),
        )

    def __format__(self, spec: str) -> str:
        # f"t{k}" / str(k) in a kernel wants the Python int (a dict key, a name): the current API unrolls the loop
        # (specialize.py rule 1); elsewhere (legacy tracing, messages) the index prints as its repr.
        _needs_concrete(self.expr.vars())
        return format(repr(self), spec)

    def __str__(self) -> str:
        return self.__format__("")

    def __repr__(self) -> str:
        return f"Index({self.expr}, shape={list(self.shape)})"


class MaskValue:
    """A compile-time predicate over index axes, loop indices and program ids, combined with ``&``."""

    __slots__ = ("mask", "shape")

    def __init__(self, mask: Mask, shape: tuple[int, ...]):
        self.mask = mask
        self.shape = shape

    def __and__(self, other: MaskValue) -> MaskValue:
        if not isinstance(other, MaskValue):
            raise NkiTraceError("masks combine only with other masks, using &", caller_loc())
        shape = broadcast_shapes(self.shape, other.shape)
        n = len(shape)
        return MaskValue(self.aligned(n) & other.aligned(n), shape)

    def aligned(self, ndim: int) -> Mask:
        shift = ndim - len(self.shape)
        if shift == 0:
            return self.mask
        return self.mask.rename({v: f"d{var_number(v) + shift}" for v in self.mask.vars() if var_kind(v) == "axis"})

    def __or__(self, other):
        raise NkiTraceError("masks support only & (a conjunction of affine conditions), not |", caller_loc())

    def __bool__(self):
        _needs_concrete(self.mask.vars())
        raise NkiTraceError(
            "a mask cannot decide Python control flow; pass it as mask= to an op, and combine masks with & "
            "rather than 'and'",
            caller_loc(),
        )


def as_index(x) -> IndexValue:
    if isinstance(x, IndexValue):
        return x
    if isinstance(x, Dim):  # a shape family's dimension: an affine term over symbols (rows < N is a mask)
        v = x.concrete()
        return IndexValue(x.expr if v is None else Affine((), v))
    if isinstance(x, bool):
        return NotImplemented
    try:
        return IndexValue(Affine((), int(x.__index__())))
    except (AttributeError, TypeError):
        return NotImplemented


def _static_int(k, what: str) -> int:
    if isinstance(k, IndexValue):
        raise NkiTraceError(f"cannot {what} a symbolic index: the product would not be affine", caller_loc())
    try:
        return int(k.__index__())
    except (AttributeError, TypeError):
        raise NkiTraceError(f"cannot {what} {k!r}: indices are integers", caller_loc()) from None


def arange(*args) -> IndexValue:
    """``nl.arange(stop)`` / ``nl.arange(start, stop[, step])``: a 1-D index."""
    vals = [_static_int(a, "build nl.arange from") for a in args]
    if len(vals) == 1:
        start, stop, step = 0, vals[0], 1
    elif len(vals) in (2, 3):
        start, stop, step = vals[0], vals[1], vals[2] if len(vals) == 3 else 1
    else:
        raise NkiTraceError("nl.arange takes (stop), (start, stop) or (start, stop, step)", caller_loc())
    if step <= 0:
        raise NkiTraceError(f"nl.arange step must be positive, got {step}", caller_loc())
    n = max(0, -(-(stop - start) // step))
    return IndexValue(Affine.var("d0", step) + start, (n,))


class MGrid:
    """``nl.mgrid[0:128, 0:512]``: one index per axis, broadcast against each other; ``.p`` and ``.x``."""

    def __getitem__(self, key) -> MGridResult:
        key = key if isinstance(key, tuple) else (key,)
        n = len(key)
        parts = []
        for axis, s in enumerate(key):
            if not isinstance(s, slice) or s.stop is None:
                raise NkiTraceError("nl.mgrid takes slices with a stop, as in nl.mgrid[0:128, 0:512]", caller_loc())
            one = arange(s.start or 0, s.stop, s.step or 1)
            shape = tuple(one.shape[0] if k == axis else 1 for k in range(n))
            parts.append(IndexValue(one.expr.rename({"d0": f"d{axis}"}), shape))
        return MGridResult(parts)


class MGridResult(tuple):
    @property
    def p(self) -> IndexValue:
        return self[0]

    @property
    def x(self) -> IndexValue:
        if len(self) < 2:
            raise NkiTraceError("this nl.mgrid has no free axis .x", caller_loc())
        return self[1]


@dataclass(frozen=True)
class DynSlice:
    """``nl.ds(start, size)``: ``size`` elements from a (possibly symbolic) ``start``."""

    start: IndexValue
    size: int


def ds(start, size) -> DynSlice:
    start_index = as_index(start)
    if start_index is NotImplemented or start_index.shape:
        raise NkiTraceError(f"nl.ds start must be an int or a scalar index, got {start!r}", caller_loc())
    return DynSlice(start_index, _static_int(size, "use as an nl.ds size"))
