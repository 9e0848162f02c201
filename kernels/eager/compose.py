"""Models as a list of kernel launches, run one after another with every intermediate in HBM: with arrays (the
NumPy reference computes every value) or from shapes alone (each launch's modelled latency on a target).

A ``Step`` names the values it reads (each optionally viewed with another shape, as a contiguous reshape costs
nothing in HBM), the kernel, its compile-time constants and the names of the values it writes. Launches do not
overlap: the model's latency is the sum of its steps', which is what running one framework op (or one fused
kernel) after another costs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

import nki_dsl as nki


@dataclass(frozen=True)
class Step:
    op: str  # the op's name in per-op breakdowns (e.g. "matmul", "attention (fused)")
    kernel: object  # an @nki.jit kernel
    inputs: tuple  # value names, or (name, shape) to pass a reshaped view
    outputs: tuple[str, ...]
    consts: dict = field(default_factory=dict)
    out_shapes: tuple = ()  # optional reshapes of the outputs as they are stored under their names


def _view(value, shape):
    if shape is None:
        return value
    if hasattr(value, "reshape"):  # an array (NumPy's or JAX's); a shape spec (``nki.spec``) has no data to view
        return value.reshape(shape)
    return nki.spec(shape, value.dtype)


def _inputs(step, values):
    args = []
    for item in step.inputs:
        name, shape = item if isinstance(item, tuple) else (item, None)
        args.append(_view(values[name], shape))
    return args


def run(steps, values: dict, backend: str | None = None) -> dict:
    """Compute every step on ``backend`` (default: where a plain kernel call runs, ``nki.default_backend``) from the
    arrays in ``values`` (updated in place and returned)."""
    for step in steps:
        result = step.kernel(*_inputs(step, values), backend=backend, **step.consts)
        results = result if isinstance(result, tuple) else (result,)
        for k, (name, r) in enumerate(zip(step.outputs, results)):
            shape = step.out_shapes[k] if k < len(step.out_shapes) else None
            values[name] = r if shape is None else r.reshape(shape)
    return values


def _output_specs(step, args):
    traced = nki.trace(step.kernel, *args, **step.consts)
    specs = []
    for k, t in enumerate(traced.ir.outputs):
        shape = step.out_shapes[k] if k < len(step.out_shapes) else t.type.shape
        specs.append(nki.spec(shape, t.type.dtype))
    return specs


def profile(steps, values: dict, target: str = "trn2"):
    """``[(step, Profile)]`` from ``values`` holding ``nki.spec`` shapes (or arrays, whose values are ignored):
    each launch in timing-only mode on ``target``."""
    values = {k: (nki.spec(v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    out = []
    for step in steps:
        args = _inputs(step, values)
        out.append((step, nki.benchmark(step.kernel, *args, target=target, **step.consts)))
        for name, s in zip(step.outputs, _output_specs(step, args)):
            values[name] = s
    return out


def breakdown(profiled) -> OrderedDict:
    """Total modelled microseconds per op name, in first-use order."""
    totals: OrderedDict = OrderedDict()
    for step, prof in profiled:
        totals[step.op] = totals.get(step.op, 0.0) + prof.latency_us
    return totals
