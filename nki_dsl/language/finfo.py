"""``nl.finfo(dtype)``: the limits of a float dtype as Python numbers, like ``numpy.finfo``.

Legacy NKI exports ``finfo`` without documenting it (reference/nki.md, "Legacy items"); kernels use it as they
would ``numpy.finfo`` (``nl.finfo(nl.bfloat16).min`` as a masking value), so it has NumPy's fields, read from
``ml_dtypes.finfo``, which also knows bfloat16 and the fp8 formats."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError


@dataclass(frozen=True)
class FloatInfo:
    """``max``/``min``: the largest finite value and its negation; ``eps``: 1.0 to the next value; ``tiny`` (=
    ``smallest_normal``), ``smallest_subnormal``, ``resolution``; ``bits``, ``nmant``, ``nexp``; ``dtype``: the
    NumPy storage dtype (``nl.bfloat16`` for bfloat16)."""

    dtype: np.dtype
    bits: int
    max: float
    min: float
    eps: float
    tiny: float
    smallest_normal: float
    smallest_subnormal: float
    resolution: float
    nmant: int
    nexp: int


def finfo(dtype) -> FloatInfo:
    """The limits of float ``dtype`` (an ``nl`` dtype, a NumPy dtype or a dtype name)."""
    d = dtypes.get(dtypes.normalize(dtype, "finfo dtype"))
    if not d.is_float:
        raise NkiApiError(f"nl.finfo: {d.name} is not a floating-point dtype (numpy.iinfo gives integer limits)")
    info = ml_dtypes.finfo(d.np_dtype)
    return FloatInfo(
        dtype=d.np_dtype,
        bits=int(info.bits),
        max=float(info.max),
        min=float(info.min),
        eps=float(info.eps),
        tiny=float(info.tiny),
        smallest_normal=float(info.smallest_normal),
        smallest_subnormal=float(info.smallest_subnormal),
        resolution=float(info.resolution),
        nmant=int(info.nmant),
        nexp=int(info.nexp),
    )
