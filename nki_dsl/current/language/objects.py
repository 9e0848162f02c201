"""``nl.NKIObject``: the base class of kernel helper classes and configurations (reference/nki.md §2.7
"NKIObject"). A class used inside a kernel derives from it (``@dataclass`` optional); an instance passed as a
kernel argument is a compile-time constant whose fields are part of the specialisation key.

Here kernels run as Python during tracing, so a helper's methods simply run; what the base class adds is the
argument handling: ``_nki_key`` gives the cache key (the class and its fields' values), and fields must be
values the key can hold (numbers, strings, tuples, enums, nested NKIObjects)."""

from __future__ import annotations

from enum import Enum

OPAQUE = "<not a compile-time value>"  # marks a field the key cannot hold (the argument is then refused)


class NKIObject:
    def _nki_key(self) -> tuple:
        return (type(self).__module__, type(self).__qualname__,
                tuple((k, _key(v)) for k, v in sorted(vars(self).items())))  # fmt: skip

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other._nki_key() == self._nki_key()

    def __hash__(self) -> int:
        return hash(self._nki_key())


def _key(value):
    if isinstance(value, NKIObject):
        return value._nki_key()
    if isinstance(value, tuple | list):
        return tuple(_key(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _key(v)) for k, v in value.items()))
    if value is None or isinstance(value, bool | int | float | str | Enum):
        return value
    return (OPAQUE, type(value).__qualname__, id(value))
