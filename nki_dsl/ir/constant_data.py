"""The ``data`` attribute of ``nl.shared_constant`` read back into an array: base64 of the zlib-compressed raw bytes
(written by ``language/constants.py`` ``encode``). Every backend that runs the op reads it here, so the checks
untrusted IR text meets are written once."""

from __future__ import annotations

import base64
import zlib

import numpy as np

from nki_dsl import dtypes
from nki_dsl.ir.source_safe import NkiCodegenError


def decode_constant(data: str, shape: tuple[int, ...], dtype_name: str) -> np.ndarray:
    """The constant as a read-only array. IR text may be untrusted: never inflate more than the tensor's size, and
    insist on exactly that many bytes."""
    np_dtype = dtypes.get(dtype_name).np_dtype
    size = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(base64.b64decode(data.encode("ascii"), validate=True), size + 1)
    except (ValueError, zlib.error) as e:  # not base64 (binascii.Error, non-ASCII) or not zlib
        raise NkiCodegenError(f"nl.shared_constant data is not base64 of zlib data: {type(e).__name__}") from None
    if len(raw) != size or not inflater.eof:
        raise NkiCodegenError(f"nl.shared_constant data does not hold exactly {size} bytes for "
                              f"{dtype_name}{list(shape)}")  # fmt: skip
    array = np.frombuffer(raw, dtype=np_dtype).reshape(shape)
    array.setflags(write=False)
    return array
