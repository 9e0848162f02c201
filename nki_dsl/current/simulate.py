"""``nki.simulate(kernel)`` / ``nki.cpu_simulate(kernel)``: the NKI CPU-simulator entry (reference/nki.md §2.7
"nki.simulate"), beside this project's ``nki.simulate(kernel, *args, target=)``.

How the two coexist: called with the kernel alone, ``simulate`` returns a ``SimulatedKernel``, a callable that
launches like the kernel (``sim(a, b)``, ``sim[2](a, b)``, or ``simulate(kernel[2])(a, b)`` as §2.7 writes it;
keyword arguments) and returns the kernel's outputs;
kernel parameters it writes are written in place in the passed arrays, as NKI's simulator does. It runs on this
project's engine simulator, so besides the outputs the modelled timing of the last call is in ``sim.profile``.
The outputs are the NumPy reference's bit for bit, except where the engine program computes a math op through
another (``nl.cos``/``nl.tan`` run as ``sin`` of a shifted argument, passes/lower_math.py): those are exact to
the fp32 rounding of the shift. Called with arguments (or ``target=``), ``simulate`` is the
project's function and returns ``(outputs, Profile)``. A zero-argument kernel therefore runs through
``simulate(kernel)()``. The target is ``NEURON_PLATFORM_TARGET_OVERRIDE`` (default trn2) for the callable form.

With LNC=2 (``sim[2]``, ``simulate(kernel[2], *args)``) the two NeuronCores run at once: each core's instance is
simulated on its own core model and ``profile`` is the slower core's (``core_profiles`` holds both); cores that
exchange data (``nisa.sendrecv``) or wait for each other (``nisa.core_barrier``) are simulated together, each
core's schedule waiting for its peer there (``backends/simulator/cores.py``); their contention for HBM bandwidth
is not modelled. (The project's legacy SPMD grids run their instances one after
the other on one core, reference/nki.md §1.5, and are profiled that way.)

The kernel may also be a plain Python function whose body uses ``nl``/``nisa`` and calls ``@nki.jit``
sub-kernels, as production libraries structure theirs: it is specialised as a current-API kernel.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import backends
from nki_dsl.current.jit import CurrentKernel, CurrentLaunch, lnc_grid, platform_target
from nki_dsl.errors import NkiApiError
from nki_dsl.profiling import _simulated as project_simulated
from nki_dsl.profiling import simulate as project_simulate
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import JitKernel, Launch


class SimulatedKernel:
    def __init__(self, kernel, grid: tuple[int, ...] = ()):
        if isinstance(kernel, CurrentLaunch):  # simulate(kernel[2]): the launch brings its LNC degree (§2.7)
            kernel, grid = kernel.jit, kernel.grid
        self.kernel = _as_kernel(kernel)
        self.grid = grid
        self.profile = None
        self.core_profiles: list = []

    def __getitem__(self, lnc) -> SimulatedKernel:
        if self.grid:
            raise NkiApiError("the LNC degree is given once: nki.simulate(kernel)[2](...) or "
                              "nki.simulate(kernel[2])(...)")
        return SimulatedKernel(self.kernel, lnc_grid(lnc))

    def __call__(self, *args, **kwargs):
        args, kwargs, back = _to_numpy(args, kwargs)
        ir, arrays, key = self.kernel.specialize(self.grid, args, kwargs, get_target(platform_target(self.kernel)))
        if ir.grid:
            outputs = self.kernel.executable(ir, key, "numpy").run(arrays)
            self.core_profiles = core_profiles(self.kernel, ir, key)
            self.profile = max(self.core_profiles, key=lambda p: p.latency_ns)
        else:
            outputs, self.profile = project_simulated(self.kernel, ir, key, arrays)
            self.core_profiles = [self.profile]
        return back(outputs)

    def __repr__(self) -> str:
        return f"<nki.simulate({self.kernel.fn.__name__}){list(self.grid) or ''}>"


def core_profiles(jit: JitKernel, ir, key) -> list:
    """The Profile of each core of an LNC launch, each instance on its own core (cached per specialisation)."""
    cache = jit.__dict__.setdefault("_core_profiles", {})
    if key not in cache:
        cache[key] = backends.load("simulator").profile_cores(ir, key[-1])
    return cache[key]


def _as_kernel(kernel) -> JitKernel:
    if isinstance(kernel, Launch):  # a legacy SPMD grid: NKI's simulator callable is a current-API entry
        raise NkiApiError(f"nki.simulate(kernel) takes a current-API kernel or kernel[lnc]; a legacy launch grid "
                          f"{list(kernel.grid)} runs through nki.simulate_kernel(kernel[grid], *args) or "
                          f"nki.simulate(kernel[grid], *args)")  # fmt: skip
    if isinstance(kernel, JitKernel):
        return kernel
    if callable(kernel):
        return CurrentKernel(kernel)
    raise NkiApiError(f"nki.simulate expects an @nki.jit kernel or a function, got {type(kernel).__name__}")


def _to_numpy(args, kwargs):
    """Torch tensors in, torch tensors out (the simulator takes "NumPy arrays or torch tensors and returns the
    same kind"); NumPy arrays pass through and are written in place."""
    torch_like = [a for a in (*args, *kwargs.values()) if type(a).__module__.startswith("torch")]
    if not torch_like:
        return args, kwargs, lambda out: out
    import torch  # only when the caller passed torch tensors

    conv = lambda a: a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a  # noqa: E731

    def back(out):
        if isinstance(out, tuple | list):
            return type(out)(back(o) for o in out)
        return torch.from_numpy(np.ascontiguousarray(out)) if isinstance(out, np.ndarray) else out

    return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}, back


def simulate(kernel, *args, target: str | None = None, **kwargs):
    """``simulate(kernel)`` -> a ``SimulatedKernel`` (NKI's CPU-simulator entry); with arguments or ``target=``,
    this project's ``(outputs, Profile)`` (see the module docstring)."""
    if not args and not kwargs and target is None:
        return SimulatedKernel(kernel)
    launch = kernel if isinstance(kernel, Launch) else _as_kernel(kernel)
    name = target or platform_target(getattr(launch, "jit", launch))
    if isinstance(launch, CurrentLaunch) and launch.grid:  # LNC=2: the cores run at once
        ir, arrays, key = launch.jit.specialize(launch.grid, args, kwargs, get_target(name))
        outputs = launch.jit.executable(ir, key, "numpy").run(arrays)
        return outputs, max(core_profiles(launch.jit, ir, key), key=lambda p: p.latency_ns)
    return project_simulate(launch, *args, target=name, **kwargs)


cpu_simulate = simulate
