"""Kernel arguments, normalised once at the call boundary: arrays become ``ArgSpec``s (shape, dtype), everything
else becomes a compile-time ``Constant`` (``trace/constants.py``) that is part of the cache key by value."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import SYMBOL_RE
from nki_dsl.ir.symbols import MAX_SYMBOL_VALUE
from nki_dsl.trace.call_errors import did_you_mean
from nki_dsl.trace.constants import Constant, constant
from nki_dsl.trace.symbolic import SymbolDecl, SymbolTable


@dataclass(frozen=True)
class ArgSpec:
    """A tensor argument by shape and dtype only (``nki.spec((8192, 4096), "bfloat16")``). A shape family's
    argument has ``SymbolDecl`` dimensions (``nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})``)."""

    shape: tuple[int | SymbolDecl, ...]
    dtype: str

    @property
    def is_symbolic(self) -> bool:
        return any(isinstance(s, SymbolDecl) for s in self.shape)


    def __str__(self) -> str:
        return f"{'x'.join(map(str, self.shape))}:{self.dtype}"


@dataclass(frozen=True)
class ArgGroup:
    """A tuple of tensor arguments (``kernel((w1, w2, w3), x)``: NKI 0.3+ takes sequence arguments as tuples,
    reference/nki.md §2.6 "Language restrictions"). Item ``k`` of parameter ``name`` is the HBM parameter
    ``name_k``; the body receives the tuple of their tensors."""

    items: tuple[ArgSpec, ...]

    @staticmethod
    def param_names(name: str, n: int) -> tuple[str, ...]:
        return tuple(f"{name}_{k}" for k in range(n))


def spec(shape, dtype, dims: dict | None = None) -> ArgSpec:
    """``nki.spec((128, 512), "float32")``; a shape family names its symbolic dimensions in ``shape`` and gives each
    an inclusive range in ``dims``: ``nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})``, or a range of
    multiples, ``(lo, hi, step)`` with ``lo`` and ``hi`` multiples of ``step``: ``dims={"M": (128, 65536, 128)}``."""
    dims = dims or {}
    out = []
    for s in shape:
        if isinstance(s, str):
            if s not in dims:
                raise NkiApiError(f"nki.spec: dimension {s!r} has no range; pass dims={{{s!r}: (lo, hi)}}")
            out.append(_symbol(s, dims[s]))
        else:
            out.append(int(s))
    unused = set(dims) - {s for s in shape if isinstance(s, str)}
    if unused:
        raise NkiApiError(f"nki.spec: dims names {sorted(unused)}, which the shape does not use")
    return ArgSpec(tuple(out), dtypes.normalize(dtype))


def symbolic_shapes(*specs: ArgSpec) -> list[tuple]:
    """The specs' shapes with each symbolic dimension as a ``Dim`` (one table for all, so ``N`` is one dimension
    across arguments): what a launcher sees of a shape family's arguments before tracing. Comparisons of them are
    decided by the declared ranges or refused (``InconclusiveDimensionError``), as inside a kernel."""
    table = SymbolTable()
    return [tuple(table.declare(s) if isinstance(s, SymbolDecl) else s for s in a.shape) for a in specs]


def _symbol(name: str, bounds) -> SymbolDecl:
    if not SYMBOL_RE.fullmatch(f"${name}"):
        raise NkiApiError(f"nki.spec: dimension name {name!r} is not an ASCII identifier of at most 64 characters")
    try:
        lo, hi, *step = (int(b.__index__()) for b in bounds)
        if len(step) > 1:
            raise ValueError
    except (AttributeError, TypeError, ValueError):
        raise NkiApiError(f"nki.spec: dims[{name!r}] must be (lo, hi) or (lo, hi, step) ints, got {bounds!r}") from None
    step = step[0] if step else 1
    if not 0 <= lo <= hi <= MAX_SYMBOL_VALUE:
        raise NkiApiError(f"nki.spec: dims[{name!r}] = ({lo}, {hi}) must satisfy 0 <= lo <= hi <= {MAX_SYMBOL_VALUE}")
    if not 1 <= step <= MAX_SYMBOL_VALUE or lo % step or hi % step:
        raise NkiApiError(f"nki.spec: dims[{name!r}]: the step {step} must be positive and divide lo = {lo} and "
                          f"hi = {hi}")  # fmt: skip
    return SymbolDecl(name, lo, hi, step)


def is_array(x) -> bool:
    """An array-like tensor argument. NumPy scalars and scalar types (``np.float32(2)``, ``np.float32``) have
    ``shape``/``dtype`` too but are constants."""
    if isinstance(x, np.ndarray):
        return True
    if isinstance(x, type | np.generic):
        return False
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__")


@dataclass(frozen=True)
class BoundArgs:
    """Argument name -> ArgSpec or Constant, in signature order."""

    items: tuple[tuple[str, ArgSpec | ArgGroup | Constant], ...]

    @property
    def key(self) -> tuple:
        return tuple((n, v if isinstance(v, ArgSpec | ArgGroup) else v.key) for n, v in self.items)


@functools.lru_cache(maxsize=256)
def _signature(fn) -> inspect.Signature:
    # Every launch binds its arguments; inspect.signature costs more than a small kernel's whole run.
    return inspect.signature(fn)


_NO_DEFAULT = inspect.Parameter.empty


@functools.lru_cache(maxsize=256)
def _plain_parameters(fn) -> tuple[tuple[str, ...], tuple[tuple[str, object], ...]] | None:
    """``(the names that take positional arguments, (name, default) of every parameter in order)`` when ``fn``
    takes only plain parameters (positional-or-keyword, then keyword-only), else None."""
    params = _signature(fn).parameters.values()
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    positional = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
    return positional, tuple((p.name, p.default) for p in params)


def _bind_plain(fn, args, kwargs) -> list | None:
    """``(name, value)`` in signature order, defaults applied, as ``Signature.bind`` + ``apply_defaults`` give them
    (a launch binds every time; ``inspect``'s binder is most of a small kernel's launch); None for anything but a
    plain call of a plain signature (the general path then binds, or says what is wrong)."""
    plain = _plain_parameters(fn)
    if plain is None:
        return None
    positional, params = plain
    if len(args) > len(positional):
        return None
    given = dict(zip(positional, args))
    for name, value in kwargs.items():
        if name in given:
            return None
        given[name] = value
    out = []
    for name, default in params:
        value = given.pop(name, default)
        if value is _NO_DEFAULT:
            return None  # a missing argument
        out.append((name, value))
    return None if given else out  # an unknown keyword left over


def bind(fn, args, kwargs) -> tuple[BoundArgs, dict[str, object]]:
    """Match call arguments to the kernel signature; returns the specs and the actual arrays by name."""
    plain = _bind_plain(fn, args, kwargs)
    if plain is not None:
        return _specs(fn, plain, _signature(fn))
    sig = _signature(fn)
    named = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    open_ended = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    for kw in kwargs:
        if kw not in sig.parameters and not open_ended:  # before binding, which would only say what is missing
            hint = did_you_mean(kw, named) or f"it takes {', '.join(named) or 'no arguments'}"
            raise NkiApiError(f"kernel {fn.__name__}: unexpected keyword argument '{kw}'; {hint}")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise NkiApiError(f"kernel {fn.__name__}: {e}") from None
    bound.apply_defaults()
    for name in bound.arguments:
        param = sig.parameters[name]
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise NkiApiError(f"kernel {fn.__name__}: *args / **kwargs parameters are not supported")
    return _specs(fn, bound.arguments.items(), sig)


def _specs(fn, arguments, sig: inspect.Signature) -> tuple[BoundArgs, dict[str, object]]:
    items, arrays = [], {}
    for name, value in arguments:
        if isinstance(value, ArgSpec):
            items.append((name, value))
        elif is_array(value):
            items.append((name, _array_spec(name, value, arrays)))
        elif _is_tensor_tuple(value):
            names = ArgGroup.param_names(name, len(value))
            clash = next((n for n in names if n in sig.parameters), None)
            if clash is not None:
                raise NkiApiError(f"kernel {fn.__name__}: item {names.index(clash)} of the tuple argument '{name}' "
                                  f"is the HBM parameter '{clash}', which is also a parameter's name")  # fmt: skip
            group = (v if isinstance(v, ArgSpec) else _array_spec(n, v, arrays) for n, v in zip(names, value))
            items.append((name, ArgGroup(tuple(group))))
        else:
            items.append((name, constant(name, value)))
    return BoundArgs(tuple(items)), arrays


def _array_spec(name: str, value, arrays: dict) -> ArgSpec:
    dtype = dtypes.normalize(value.dtype, name)
    # An array of a packed MX type reaches the backends as its raw bits (a view: in-place writes land).
    packed = dtypes.get(dtype)
    arrays[name] = value.view(packed.np_dtype) if packed.is_packed else value
    return ArgSpec(tuple(map(int, value.shape)), dtype)


def _is_tensor_tuple(value) -> bool:
    """A tuple (or list) of tensors only, not a namedtuple config: each item becomes an HBM parameter. A tuple
    mixing tensors and constants is refused by ``constant`` (trace/constants.py), naming the item."""
    if not isinstance(value, tuple | list) or hasattr(value, "_fields") or not value:
        return False
    return all(isinstance(v, ArgSpec) or is_array(v) for v in value)
