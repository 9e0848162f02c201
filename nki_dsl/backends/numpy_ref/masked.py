"""Run-time helpers for reductions under a mask that constrains reduced axes (``reduce_mask``): masked-off
elements take no part, as if they held the reduction's identity; an empty reduction gives the identity."""

from __future__ import annotations

import numpy as np

from nki_dsl.ir.functions import reduction_identity

_NUMPY = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
          "logical_and": np.logical_and, "logical_or": np.logical_or, "bitwise_and": np.bitwise_and,
          "bitwise_or": np.bitwise_or}  # fmt: skip


def masked_reduce(fn: str, data, valid, axis: tuple[int, ...], keepdims: bool):
    """The ``fn``-reduction of ``data`` over ``axis`` counting only the elements where ``valid`` (None: all)."""
    data = np.asarray(data)
    ident = reduction_identity(fn, data.dtype)
    if valid is not None:
        data = np.where(np.broadcast_to(valid, data.shape), data, ident)
    ufunc = _NUMPY[fn]
    return ufunc.reduce(data, axis=axis, keepdims=keepdims, initial=ident)


def embed(data, valid, starts: tuple[int, ...], shape: tuple[int, ...]):
    """``data`` (a box of an access, starting at ``starts``) placed into an array of the access ``shape``, and the
    boolean array of the elements it covers that ``valid`` keeps: for ops whose result depends on an element's
    position in the access, not only on its value."""
    data = np.asarray(data)
    full = np.zeros(shape, dtype=data.dtype)
    keep = np.zeros(shape, dtype=bool)
    region = tuple(slice(s, s + n) for s, n in zip(starts, data.shape))
    full[region] = data
    keep[region] = True if valid is None else np.broadcast_to(valid, data.shape)
    return full, keep
