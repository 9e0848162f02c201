"""Tensor creation: ``ndarray``, ``zeros``, ``ones``, ``full`` and the ``*_like`` forms."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.language.buffers import split_shape, to_buffer
from nki_dsl.trace.semantics import build_op


def _type(shape, dtype, buffer) -> TensorType:
    dims, par_axis = split_shape(shape)
    return TensorType(dims, dtypes.normalize(dtype), to_buffer(buffer), par_axis)


def ndarray(shape, dtype, *, buffer=None, name=""):
    """A new tensor whose contents are undefined until written (on-chip memory is not zeroed)."""
    return build_op("alloc", {}, result_type=_type(shape, dtype, buffer), hint=name)


def full(shape, fill_value, dtype, *, buffer=None, name=""):
    """A new tensor with every element ``fill_value``."""
    return build_op("nl.full", {}, {"value": float(fill_value)}, result_type=_type(shape, dtype, buffer), hint=name)


def zeros(shape, dtype, *, buffer=None, name=""):
    return full(shape, 0.0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, *, buffer=None, name=""):
    return full(shape, 1.0, dtype, buffer=buffer, name=name)


def _like(a, dtype, buffer):
    t = a.access().tensor.type
    shape = a.shape
    return shape, (dtype if dtype is not None else t.dtype), (buffer if buffer is not None else _default_like(t))


def _default_like(t: TensorType) -> Buffer:
    return t.buffer if t.buffer.on_chip else Buffer.SBUF


def zeros_like(a, dtype=None, *, buffer=None, name=""):
    shape, dt, buf = _like(a, dtype, buffer)
    return zeros(shape, dt, buffer=buf, name=name)


def ones_like(a, dtype=None, *, buffer=None, name=""):
    shape, dt, buf = _like(a, dtype, buffer)
    return ones(shape, dt, buffer=buf, name=name)


def full_like(a, fill_value, dtype=None, *, buffer=None, name=""):
    shape, dt, buf = _like(a, dtype, buffer)
    return full(shape, fill_value, dt, buffer=buf, name=name)


def empty_like(a, dtype=None, *, buffer=None, name=""):
    shape, dt, buf = _like(a, dtype, buffer)
    return ndarray(shape, dt, buffer=buf, name=name)
