"""``nki.simulate`` and ``nki.benchmark``: a kernel's modelled timing on the engine simulator, with its outputs
(``simulate``) or from shapes alone (``benchmark``).

Both resolve the target name once into a ``Target`` and normalise their arguments once through the kernel's
``specialize`` (the trace cache, keyed by source hash, argument specs and constants and grid; a trace is shared by
every target unless the kernel consulted the target). The simulator's reuse policy lives here, not in the kernel: a
Profile depends on shapes, dtypes, grid and target only, so the simulator runs once per specialisation key and
asking again for the same shapes costs a dictionary lookup (plus a NumPy run when there is data).
"""

from __future__ import annotations

import weakref

from nki_dsl import backends
from nki_dsl.errors import NkiApiError
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import JitKernel, as_launch, concrete_only
from nki_dsl.trace.specs import ArgSpec

# kernel -> {specialisation key (target included): simulator Profile}; an entry lives as long as its kernel.
_PROFILES: weakref.WeakKeyDictionary[JitKernel, dict] = weakref.WeakKeyDictionary()


def _simulated(jit: JitKernel, ir, key: tuple, arrays: dict | None):
    """``(outputs, Profile)`` of specialisation ``key`` on the engine simulator for the target in the key
    (``outputs`` None when ``arrays`` is None: timing only). Later calls with data take the outputs from the NumPy
    reference, which is what the simulator's numbers mode returns (bit-identical by construction)."""
    simulator = backends.load("simulator")
    if arrays is not None and _reads_registers(ir):
        # Runtime loops run as many iterations as the data says: never from the cache, which holds at most the
        # timing-only profile (every loop at its declared bound) of an earlier nki.benchmark of these shapes.
        return simulator.simulate(ir, arrays, key[-1])
    profiles = _PROFILES.setdefault(jit, {})
    profile = profiles.get(key)
    if profile is not None:
        outputs = None if arrays is None else jit.executable(ir, key, "numpy").run(arrays)
        return outputs, profile
    outputs, profile = simulator.simulate(ir, arrays, key[-1])  # the key ends with the target
    profiles[key] = profile
    return outputs, profile


def _reads_registers(ir) -> bool:
    """``ir`` has a runtime loop (ir/runtime_loops.py): its timing depends on the values, not only the shapes."""
    return any(getattr(s, "reads", None) is not None for s, _ in ir.walk())


def simulate(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs):
    """``(outputs, Profile)``: run ``kernel`` (or ``kernel[grid]``) on the engine simulator of ``target``. The
    outputs equal the NumPy reference's; the Profile holds the modelled latency, per-engine busy time, FLOPs,
    bytes, roofline position and critical path. Arguments are NumPy arrays (``nki.spec`` shapes: use
    ``nki.benchmark``)."""
    launch = as_launch(kernel)
    target = get_target(target)  # the boundary: a name (or Target) becomes the Target passed inward
    specs = [a for a in (*args, *kwargs.values()) if isinstance(a, ArgSpec)]
    if specs:
        raise NkiApiError(f"nki.simulate computes outputs, so it needs arrays; got nki.spec {specs[0]} "
                          f"(for timing from shapes alone use nki.benchmark)")  # fmt: skip
    ir, arrays, key = launch.jit.specialize(launch.grid, args, kwargs, target)
    return _simulated(launch.jit, ir, key, arrays)


def benchmark_profile(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs):
    """The Profile of ``kernel`` on ``target`` in timing-only mode: arguments may be ``nki.spec(shape, dtype)``
    (or arrays, whose values are ignored), so shapes too large to compute on a CPU still simulate."""
    launch = as_launch(kernel)
    ir, _, key = launch.jit.specialize(launch.grid, args, kwargs, get_target(target))
    concrete_only(ir, "be timed")
    return _simulated(launch.jit, ir, key, None)[1]
