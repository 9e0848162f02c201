"""``nl.shared_constant``: a tensor in HBM holding data known when the kernel is traced (an identity matrix, a
lookup table). The data travels inside the IR as an attribute, so IR text alone reproduces the kernel."""

from __future__ import annotations

import base64
import zlib

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op


def shared_constant(constant, dtype=None):
    """An HBM tensor with the values of ``constant`` (array-like), converted to ``dtype`` (rounding to nearest;
    default: ``constant``'s own dtype, float64 read as fp32). Kernels read it with ``nl.load``; it is read-only."""
    try:
        array = np.asarray(constant)
        name = dtypes.normalize(dtype if dtype is not None else array.dtype, "shared_constant dtype")
    except NkiApiError as e:
        raise NkiApiError(e.bare_message, caller_loc(), "nl.shared_constant") from None
    if array.ndim == 0 or array.size == 0:
        raise NkiApiError(f"constant must be a non-empty array, got shape {array.shape}", caller_loc(),
                          "nl.shared_constant")  # fmt: skip
    rtype = TensorType(tuple(int(s) for s in array.shape), name, Buffer.SHARED_HBM)
    return build_op("nl.shared_constant", {}, {"data": encode(array, name)}, result_type=rtype, hint="const")


def encode(array: np.ndarray, dtype_name: str) -> str:
    """The op's ``data`` attribute: base64 of the zlib-compressed raw bytes of ``array`` in ``dtype_name``."""
    storage = _convert(array, dtype_name)
    return base64.b64encode(zlib.compress(np.ascontiguousarray(storage).tobytes())).decode("ascii")


def _convert(array: np.ndarray, dtype_name: str) -> np.ndarray:
    """``array`` in the storage type of ``dtype_name``: floats round to nearest once (from fp32, as engines do),
    integers must fit."""
    target = dtypes.get(dtype_name)
    if target.is_float:
        return array.astype(np.float32).astype(target.np_dtype)
    if array.dtype.kind == "f" and not np.array_equal(array, np.rint(array)):
        raise NkiApiError(f"constant has non-integer values for dtype {dtype_name}", caller_loc(), "nl.shared_constant")
    info = np.iinfo(target.np_dtype) if target.kind != "bool" else None
    if info is not None and (array.min() < info.min or array.max() > info.max):
        raise NkiApiError(f"constant values exceed the range of {dtype_name}", caller_loc(), "nl.shared_constant")
    return array.astype(target.np_dtype)
