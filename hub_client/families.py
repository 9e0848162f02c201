"""Matching a call to a shape family: the published ``N x 512:float32`` with ``N in 1..65536`` against a call's
arrays. The family's IR is the authority (``nki.ShapeFamily.bind`` checks the call again against the parsed IR);
this is the manifest-level match that picks the specialisation and says why a near miss does not fit."""

from __future__ import annotations

import numpy as np

from hub_client.manifest import SpecRecord


def bind(spec: SpecRecord, args: tuple) -> tuple[dict[str, int] | None, str | None]:
    """``(values, None)`` when the arrays fit the family, ``(None, why)`` when their ranks, fixed dimensions and
    dtypes fit but a dimension is outside its range (or inconsistent), ``(None, None)`` when they do not fit at all."""
    if len(args) != len(spec.args):
        return None, None
    values: dict[str, int] = {}
    for a, s in zip(args, spec.args):
        if not hasattr(a, "shape") or len(a.shape) != len(s.shape) or np.dtype(a.dtype).name != s.dtype:
            return None, None
        for want, got in zip(s.shape, a.shape):
            if isinstance(want, int) and want != got:
                return None, None
    for a, s in zip(args, spec.args):
        for want, got in zip(s.shape, a.shape):
            if isinstance(want, str) and values.setdefault(want, int(got)) != int(got):
                return None, f"dimension {want} is {values[want]} in one array and {got} in another"
    for name, v in values.items():
        lo, hi, step = spec.dims[name]
        if not lo <= v <= hi:
            return None, f"dimension {name} = {v} is outside the published range {lo}..{hi}"
        if v % step:
            return None, f"dimension {name} = {v} is not a multiple of {step} (the published {name} in {lo}..{hi} " \
                         f"step {step})"
    return values, None
