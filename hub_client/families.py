"""Matching a call to a shape family: the published ``N x 512:float32`` with ``N in 1..65536`` against a call's
arrays. The family's IR is the authority (``nki.ShapeFamily.bind`` checks the call again against the parsed IR);
this is the manifest-level match that picks the specialisation and says why a near miss does not fit."""

from __future__ import annotations

import numpy as np

from hub_client.manifest import SpecRecord


def bind(spec: SpecRecord, args: tuple) -> tuple[dict[str, int] | None, str | None]:
    """``(values, None)`` when the arrays fit the family, ``(None, why)`` when their ranks, fixed dimensions and
    dtypes fit but a dimension is outside its range (or inconsistent), ``(None, None)`` when they do not fit at all."""
    values, why = _values(spec, args)
    if values is None:
        return None, why
    why = next((w for n, v in values.items() if (w := _outside(spec, n, v))), None)
    return (None, why) if why else (values, None)


def above(spec: SpecRecord, args: tuple) -> dict[str, int] | None:
    """The dimensions above the tops of their ranges (``{"B": 1000}``) when those are the arrays' only misfit (every
    other dimension in its range, each a multiple of its step): a call a loader may run as instances over slices of
    the dimensions the family's kernel is independent along (``hub_client/chunks.py``). None otherwise."""
    values, _ = _values(spec, args)
    if values is None:
        return None
    over = {n: v for n, v in values.items() if v > spec.dims[n][1] and v % spec.dims[n][2] == 0}
    rest_fit = all(n in over or _outside(spec, n, v) is None for n, v in values.items())
    return over if over and rest_fit else None


def _values(spec: SpecRecord, args: tuple) -> tuple[dict[str, int] | None, str | None]:
    """The symbols' values from the arrays, ranges unchecked; ``(None, why)`` / ``(None, None)`` as ``bind``."""
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
    return values, None


def _outside(spec: SpecRecord, name: str, v: int) -> str | None:
    lo, hi, step = spec.dims[name]
    if not lo <= v <= hi:
        return f"dimension {name} = {v} is outside the published range {lo}..{hi}"
    if v % step:
        return f"dimension {name} = {v} is not a multiple of {step} (the published {name} in {lo}..{hi} step {step})"
    return None
