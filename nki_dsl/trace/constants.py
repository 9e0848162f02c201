"""Kernel arguments that are compile-time constants: what the kernel body receives, the by-value cache key and
the record the IR keeps of them.

NKI specialises a kernel on every argument that is not a tensor (reference/nki.md §2.6 "Kernels must be pure
functions of args (cached by shapes/dtypes/constants)"; NKIObject configs and enums, "nki.language"): numbers,
strings, None, tuples, dtypes (``norm_dtype=nl.float32``), enum members, frozen dataclasses (a ``FlashConfig``)
and functions. The body gets the Python value itself; the cache key holds a hashable by-value image of it, so
two equal configs share a trace and different ones do not. Values that may change after the key is taken
(mutable objects the body would see live) cannot be keyed by value and are refused, naming the parameter.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from dataclasses import dataclass

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError


@dataclass(frozen=True)
class Constant:
    """A constant argument: ``value`` goes to the kernel body, ``key`` into the cache key, ``record`` (None,
    bool, int, float, str or tuples of them) into ``Kernel.constants`` and so into the IR text."""

    value: object
    key: object
    record: object


def constant(param: str, value) -> Constant:
    """Normalise the non-array argument ``value`` of parameter ``param``, or raise NkiApiError naming it."""
    plain = _plain(value)
    return plain if plain is not None else _normalise(param, value, param)


_PLAIN_TYPES = (type(None), bool, int, str)


def _plain(value) -> Constant | None:
    """``_normalise`` of a value of exactly a builtin scalar type, or a tuple of them, by its type alone (every
    launch normalises its constant arguments; the general path's checks cost microseconds each); None otherwise."""
    t = type(value)
    if t in _PLAIN_TYPES:
        return Constant(value, (t.__name__, value), value)
    if t is float:
        return Constant(value, ("float", value.hex()), value)
    if t is tuple and all(type(v) in _PLAIN_TYPES for v in value):
        return Constant(value, (tuple, tuple((type(v).__name__, v) for v in value)), value)
    return None


def _normalise(param: str, value, where: str) -> Constant:
    # bool before int (True == 1 but selects other code); the type is in the key so that 2 and 2.0, which
    # promote differently (nki.md §2.2 weak scalar types), are different specialisations.
    if isinstance(value, enum.Enum):  # first: IntEnum / str-Enum members are also ints / strings
        cls = type(value)
        return Constant(value, ("enum", cls, value.name), f"{cls.__qualname__}.{value.name}")
    if value is None or isinstance(value, bool | int | str):
        return Constant(value, (type(value).__name__, value), value)
    if isinstance(value, float):
        return Constant(value, ("float", value.hex()), value)  # hex: nan == nan and -0.0 != 0.0 as keys
    if _is_dtype(value):
        return _dtype(param, value)
    if isinstance(value, np.generic):
        return _normalise(param, value.item(), where)
    if isinstance(value, tuple | list):
        items = [_normalise(param, v, f"{where}[{k}]") for k, v in enumerate(value)]
        values = tuple(c.value for c in items)  # a list arrives as a tuple: the body cannot change the key's copy
        cls = type(value) if hasattr(value, "_fields") else tuple  # a namedtuple keeps its type and field names
        return Constant(cls(*values) if cls is not tuple else values, (cls, tuple(c.key for c in items)),
                        tuple(c.record for c in items))  # fmt: skip
    if isinstance(value, dict | types.MappingProxyType):
        return _mapping(param, value, where)
    if callable(getattr(value, "_nki_key", None)) and not isinstance(value, type):
        return _nki_object(param, value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass(param, value, where)
    if callable(value):
        return _callable(param, value, where)
    if where != param and isinstance(getattr(value, "shape", None), tuple) and hasattr(value, "__array__"):
        raise NkiApiError(
            f"argument '{param}': {where} is an array inside a compile-time constant; a tuple argument holds "
            f"tensors only or constants only: pass the tensors as a tuple of their own or as separate arguments"
        )
    raise NkiApiError(
        f"argument '{param}': {_subject(param, where)} of type {type(value).__name__} is neither an array nor a "
        f"compile-time constant (number, string, None, tuple, dtype, enum member, frozen dataclass or function)"
    )


def _subject(param: str, where: str) -> str:
    return "the value" if where == param else where


def _is_dtype(value) -> bool:
    if isinstance(value, np.dtype):
        return True
    return isinstance(value, type) and issubclass(value, np.generic)  # np.float32, ml_dtypes.bfloat16


def _dtype(param: str, value) -> Constant:
    np_dtype = np.dtype(value)
    try:
        record = dtypes.normalize(np_dtype, f"argument '{param}'")
    except NkiApiError:
        record = str(np_dtype)  # a dtype the language does not compute in may still steer Python code
    # Keyed by the exact NumPy dtype: float64 and float32 both compute as float32 but a kernel may branch on them.
    return Constant(value, ("dtype", np_dtype.str, np_dtype.name), record)


def _mapping(param: str, value, where: str) -> Constant:
    keys = list(value)
    bad = [k for k in keys if not isinstance(k, str)]
    if bad:
        raise NkiApiError(f"argument '{param}': {where} has key {bad[0]!r}; constant dicts have string keys only")
    items = {k: _normalise(param, value[k], f"{where}[{k!r}]") for k in sorted(keys)}
    # The body gets a read-only copy: a kernel writing into it would change a value the cache key was taken from.
    frozen = types.MappingProxyType({k: c.value for k, c in items.items()})
    key = ("dict", tuple((k, c.key) for k, c in items.items()))
    return Constant(frozen, key, tuple((k, c.record) for k, c in items.items()))


def _dataclass(param: str, value, where: str) -> Constant:
    cls = type(value)
    if not cls.__dataclass_params__.frozen:
        raise NkiApiError(
            f"argument '{param}': {_subject(param, where)} is an instance of the mutable "
            f"dataclass {cls.__qualname__}; a compile-time constant must not change after the kernel is "
            f"specialised on it: declare it @dataclass(frozen=True)"
        )
    fields = []
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if isinstance(v, list | dict | set):  # the body would see the live container the key was a copy of
            raise NkiApiError(
                f"argument '{param}': field {where}.{f.name} of the frozen dataclass {cls.__qualname__} is a "
                f"mutable {type(v).__name__}; use a tuple (or a frozen dataclass) so the value cannot change"
            )
        fields.append((f.name, _normalise(param, v, f"{where}.{f.name}")))
    key = ("dataclass", cls, tuple((n, c.key) for n, c in fields))
    return Constant(value, key, (cls.__qualname__, *((n, c.record) for n, c in fields)))


def _nki_object(param: str, value) -> Constant:
    """An ``nl.NKIObject`` of the current API (nki_dsl/current/language/objects.py): keyed by its class and
    fields; the body gets a copy rebuilt from its ``__dict__`` (as NKI does), so the key cannot change under it."""
    import copy

    key = value._nki_key()
    if any(isinstance(part, tuple) and part[:1] == ("<not a compile-time value>",) for part in _flatten(key)):
        raise NkiApiError(f"argument '{param}': the {type(value).__qualname__} instance has a field that is not a "
                          f"compile-time value (number, string, tuple, enum, NKIObject)")  # fmt: skip
    return Constant(copy.deepcopy(value), ("nkiobject", key), type(value).__qualname__)


def _flatten(key):
    yield key
    if isinstance(key, tuple):
        for part in key:
            yield from _flatten(part)


def _callable(param: str, value, where: str) -> Constant:
    try:
        hash(value)
    except TypeError:
        raise NkiApiError(
            f"argument '{param}': {_subject(param, where)} is an unhashable callable "
            f"{type(value).__name__}; pass a function"
        ) from None
    # Functions are constants by identity: two different functions may compute the same thing, but only the
    # same function certainly does.
    return Constant(value, ("fn", value), getattr(value, "__name__", type(value).__name__))
