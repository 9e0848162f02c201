"""Matching a call to a shape family: the published ``N x 512:float32`` with ``N in 1..65536`` against a call's
arrays. The family's IR is the authority (``nki.ShapeFamily.bind`` checks the call again against the parsed IR);
this is the manifest-level match that picks the specialisation and says why a near miss does not fit.

A family may view the caller's arrays (``B x S x (3 x H x D)``: one axis of the call holding several of the
kernel's, row-major), with ``keywords`` giving dimensions (``num_heads = "H"``) and ``returns`` saying how the
outputs' axes merge back: ``values_of`` solves each merged axis for its one dimension not known otherwise (size over
the rest's product, exact), ``to_kernel`` reshapes the call's arrays to the kernel's shapes and ``to_caller`` the
outputs back (checked against ``returns``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import replace

import numpy as np

from hub_client.errors import IRRejectedError
from hub_client.manifest import SpecRecord
from hub_client.package import MAX_DIM, ArgSpec, shape_at, shown


def bind(spec: SpecRecord, args: tuple, kwargs: dict | None = None) -> tuple[dict[str, int] | None, str | None]:
    """``(values, None)`` when the arrays (and the keywords giving dimensions) fit the family, ``(None, why)`` when
    their ranks, fixed dimensions and dtypes fit but a dimension is outside its range (or inconsistent), ``(None,
    None)`` when they do not fit at all."""
    values, why = values_of(spec, args, kwargs or {})
    if values is None:
        return None, why
    why = next((w for n, v in values.items() if (w := _outside(spec, n, v))), None)
    return (None, why) if why else (values, None)


def bind_kernel(spec: SpecRecord, arrays: tuple) -> tuple[dict[str, int] | None, str | None]:
    """``bind`` for arrays of the kernel's own shapes (``to_kernel``'s, a part of them, or test vectors): every
    axis its own, no keyword needed."""
    flat = replace(spec, args=tuple(ArgSpec(a.shape, a.dtype) for a in spec.args), keywords={})
    return bind(flat, arrays)


def above(spec: SpecRecord, args: tuple, kwargs: dict | None = None) -> dict[str, int] | None:
    """The dimensions above the tops of their ranges (``{"B": 1000}``) when those are the arrays' only misfit (every
    other dimension in its range, each a multiple of its step): a call a loader may run as instances over slices of
    the dimensions the family's kernel is independent along (``hub_client/chunks.py``). None otherwise."""
    values, _ = values_of(spec, args, kwargs or {})
    if values is None:
        return None
    over = {n: v for n, v in values.items() if v > spec.dims[n][1] and v % spec.dims[n][2] == 0}
    rest_fit = all(n in over or _outside(spec, n, v) is None for n, v in values.items())
    return over if over and rest_fit else None


def to_kernel(spec: SpecRecord, args: tuple, values: dict[str, int]) -> tuple:
    """The caller's arrays as the kernel takes them: each reshaped to the kernel's axes (row-major, a view of a
    contiguous array) where ``args`` group axes."""
    return tuple(a.reshape(shape_at(s.shape, values)) if s.groups else a for a, s in zip(args, spec.args))


def to_caller(spec: SpecRecord, out, values: dict[str, int], label: str):
    """The kernel's outputs as the caller gets them: merged per ``returns`` (``"B x S x (H x D)"``); an output of
    another shape than the manifest says is refused."""
    return merge_outputs(spec.returns, out, values, lambda why: IRRejectedError(f"{label}: {why}"))


def merge_outputs(returns: tuple, out, values: dict[str, int], refuse):
    """``out`` with each output's grouped axes merged per ``returns`` (parsed: ``(shape, groups)`` per output), the
    loader's and the bundle builder's one rule; an output of another shape than declared raises ``refuse(why)``."""
    if not returns:
        return out
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(returns):
        raise refuse(f"the kernel returns {len(outs)} outputs, the manifest's returns names {len(returns)}")
    merged = []
    for o, (shape, groups) in zip(outs, returns):
        if tuple(o.shape) != shape_at(shape, values):
            raise refuse(f"an output of shape {tuple(o.shape)} is not the manifest's returns {shape_at(shape, values)}")
        merged.append(o.reshape(shape_at(shape, values, groups)) if groups else o)
    return tuple(merged) if isinstance(out, tuple) else merged[0]


def _keyword_values(spec: SpecRecord, kwargs: dict) -> tuple[dict[str, int] | None, str | None]:
    out = {}
    for k, name in spec.keywords.items():
        if k not in kwargs:
            continue
        v = kwargs[k]
        if isinstance(v, bool | np.bool_) or not isinstance(v, numbers.Integral) or not 1 <= int(v) <= MAX_DIM:
            return None, f"{k}={shown(v)} gives dimension {name}, so it must be an int in 1..{MAX_DIM}"
        out[name] = int(v)
    return out, None


def values_of(spec: SpecRecord, args: tuple, kwargs: dict) -> tuple[dict[str, int] | None, str | None]:
    """The symbols' values from the arrays and keywords, ranges unchecked; ``(None, why)`` / ``(None, None)`` as
    ``bind``. An axis of the caller's array holding several of the kernel's (a group) gives the one dimension of it
    not known otherwise (from a keyword, or another axis), as its size over the rest's product."""
    if len(args) != len(spec.args):
        return None, None
    pending = []  # (argument, axis, the kernel's axes it holds, its size)
    for i, (a, s) in enumerate(zip(args, spec.args)):
        axes = s.call_axes
        if not hasattr(a, "shape") or len(a.shape) != len(axes) or np.dtype(a.dtype).name != s.dtype:
            return None, None
        for k, (members, got) in enumerate(zip(axes, a.shape)):
            if all(isinstance(m, int) for m in members) and math.prod(members) != got:
                return None, None
            pending.append((i, k, members, int(got)))
    values, why = _keyword_values(spec, kwargs)
    if values is None:
        return None, why
    progress = True
    while pending and progress:
        progress, left = False, []
        for i, k, members, got in pending:
            unknown = [m for m in members if isinstance(m, str) and m not in values]
            known = math.prod(values.get(m, 1) if isinstance(m, str) else m for m in members if m not in unknown)
            if not unknown:
                if known != got:
                    product = " x ".join(map(str, members))
                    return None, (f"dimension {members[0]} is {values[members[0]]} in one array and {got} in another"
                                  if len(members) == 1 else f"axis {k} of argument {i} is {got}, not {product} = "
                                  f"{known}")  # fmt: skip
                progress = True
            elif len(unknown) == 1 and got % known == 0:
                values[unknown[0]] = got // known
                progress = True
            elif len(unknown) == 1:
                return None, f"axis {k} of argument {i} is {got}, not a multiple of {known} (its other dimensions)"
            else:
                left.append((i, k, members, got))
        pending = left
    if pending:
        i, k, members, got = pending[0]
        names = [m for m in members if isinstance(m, str) and m not in values]
        give = [kw for kw, n in spec.keywords.items() if n in names]
        return None, (f"axis {k} of argument {i} ({got}) holds dimensions {', '.join(names)}, which its size alone "
                      f"cannot tell apart" + (f"; pass {' or '.join(give)}" if give else ""))  # fmt: skip
    return values, None


def _outside(spec: SpecRecord, name: str, v: int) -> str | None:
    lo, hi, step = spec.dims[name]
    if not lo <= v <= hi:
        return f"dimension {name} = {v} is outside the published range {lo}..{hi}"
    if v % step:
        return f"dimension {name} = {v} is not a multiple of {step} (the published {name} in {lo}..{hi} step {step})"
    return None
