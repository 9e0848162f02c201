"""Trace-time tensor handles: what kernel code holds and indexes.

``NkiTensor`` stands for a whole IR tensor (a parameter, an allocation or an op's result tile); ``TileView`` for
an access into one (``t[ix, iy]``). Both act as operands, support Python arithmetic (routed to ``nl`` ops) and
in-place writes (``t[...] = x``, ``t[...] += x``).
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiTraceError
from nki_dsl.ir.affine import Mask
from nki_dsl.ir.nodes import Access, Tensor
from nki_dsl.trace.access import index_access
from nki_dsl.trace.builder import caller_loc


def _math():
    from nki_dsl.language import math  # the language layer defines the ops the operators stand for

    return math


def _memory():
    from nki_dsl.language import memory

    return memory


class _TileLike:
    """Operators and shared accessors for whole tensors and views."""

    __slots__ = ()
    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def access(self) -> Access:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.access().shape)

    @property
    def dtype(self) -> np.dtype:
        return dtypes.get(self.access().tensor.type.dtype).np_dtype

    @property
    def buffer(self) -> str:
        return self.access().tensor.type.buffer.value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key) -> TileView:
        return TileView(index_access(self.access(), key, caller_loc()))

    def __setitem__(self, key, value) -> None:
        target = index_access(self.access(), key, caller_loc())
        accumulated = isinstance(value, TileView) and value._accumulated_into is not None
        if accumulated and _same_access(value._accumulated_into, target):
            return  # ``t[k] += x`` already accumulated in TileView.__iadd__
        _memory().assign(target, value, mask=_computed_mask(value, target))

    def broadcast_to(self, shape):
        return _memory().broadcast_to(self, shape=shape)

    # Python operators: the nl op each stands for.
    def __add__(self, o):
        return _math().add(self, o)

    def __radd__(self, o):
        return _math().add(o, self)

    def __sub__(self, o):
        return _math().subtract(self, o)

    def __rsub__(self, o):
        return _math().subtract(o, self)

    def __mul__(self, o):
        return _math().multiply(self, o)

    def __rmul__(self, o):
        return _math().multiply(o, self)

    def __truediv__(self, o):
        return _math().divide(self, o)

    def __rtruediv__(self, o):
        return _math().divide(o, self)

    def __pow__(self, o):
        return _math().power(self, o)

    def __rpow__(self, o):
        return _math().power(o, self)

    def __mod__(self, o):
        return _math().mod(self, o)

    def __rmod__(self, o):
        return _math().mod(o, self)

    def __neg__(self):
        return _math().negative(self)

    def __abs__(self):
        return _math().abs(self)

    def __invert__(self):
        return _math().invert(self)

    def __and__(self, o):
        return _math().bitwise_and(self, o)

    def __rand__(self, o):
        return _math().bitwise_and(o, self)

    def __or__(self, o):
        return _math().bitwise_or(self, o)

    def __ror__(self, o):
        return _math().bitwise_or(o, self)

    def __xor__(self, o):
        return _math().bitwise_xor(self, o)

    def __rxor__(self, o):
        return _math().bitwise_xor(o, self)

    def __lshift__(self, o):
        return _math().left_shift(self, o)

    def __rlshift__(self, o):
        return _math().left_shift(o, self)

    def __rshift__(self, o):
        return _math().right_shift(self, o)

    def __rrshift__(self, o):
        return _math().right_shift(o, self)

    def __lt__(self, o):
        return _math().less(self, o)

    def __le__(self, o):
        return _math().less_equal(self, o)

    def __gt__(self, o):
        return _math().greater(self, o)

    def __ge__(self, o):
        return _math().greater_equal(self, o)

    def __eq__(self, o):  # type: ignore[override]
        return _math().equal(self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _math().not_equal(self, o)

    __hash__ = object.__hash__

    def __bool__(self):
        raise NkiTraceError(
            "a tile has no truth value at trace time: control flow cannot depend on tensor values "
            "(use nl.where or a mask)",
            caller_loc(),
        )

    def __iter__(self):
        raise NkiTraceError("a tile cannot be iterated in Python; index it or use an nl loop", caller_loc())

    def __len__(self):
        return self.shape[0]

    def __array__(self, *args, **kwargs):
        raise NkiTraceError(
            "a traced tile has no NumPy value inside the kernel; use nl ops on it (values exist only when the "
            "kernel runs)",
            caller_loc(),
        )


class NkiTensor(_TileLike):
    """A whole tensor. In-place ``t += x`` accumulates into it (the PSUM / SBUF accumulation idiom).

    ``mask`` is the mask of the op that computed this tile (over its axes): the op wrote nothing outside it, so
    ``t[...] = x`` / ``t[...] += x`` write only there too, as the instruction writing into ``t`` would in NKI."""

    __slots__ = ("tensor", "mask")

    def __init__(self, tensor: Tensor, mask: Mask | None = None):
        self.tensor = tensor
        self.mask = mask

    def access(self) -> Access:
        return self.tensor.full_access()

    @property
    def name(self) -> str:
        return self.tensor.name

    def __iadd__(self, other):
        _memory().assign(self.access(), other, accumulate="add", mask=_computed_mask(other, self.access()))
        return self

    def reshape(self, shape):
        return _memory().reshape(self, shape)

    def __repr__(self) -> str:
        return f"NkiTensor({self.tensor!r})"


class TileView(_TileLike):
    """An access into a tensor. ``view += x`` accumulates immediately and marks the view so that the
    ``__setitem__`` Python performs afterwards for ``t[k] += x`` does not write twice."""

    __slots__ = ("_access", "_accumulated_into")

    def __init__(self, access: Access, accumulated_into: Access | None = None):
        self._access = access
        self._accumulated_into = accumulated_into

    def access(self) -> Access:
        return self._access

    def __iadd__(self, other):
        _memory().assign(self._access, other, accumulate="add", mask=_computed_mask(other, self._access))
        return TileView(self._access, accumulated_into=self._access)

    def reshape(self, shape):
        raise NkiTraceError("only whole HBM tensors can be reshaped", caller_loc())

    def __repr__(self) -> str:
        return f"TileView({self._access.describe()})"


def _computed_mask(value, target: Access) -> Mask | None:
    """The mask a write of ``value`` into ``target`` inherits from the op that computed ``value``."""
    if isinstance(value, NkiTensor) and value.mask is not None and len(value.shape) == len(target.shape):
        return value.mask
    return None


def _same_access(a: Access, b: Access) -> bool:
    return a.tensor is b.tensor and a.index == b.index and a.shape == b.shape


def is_tile(x) -> bool:
    return isinstance(x, _TileLike)
