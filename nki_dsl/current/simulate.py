"""``nki.simulate(kernel)`` / ``nki.cpu_simulate(kernel)``: the NKI CPU-simulator entry (reference/nki.md §2.7
"nki.simulate"), beside this project's ``nki.simulate(kernel, *args, target=)``.

How the two coexist: called with the kernel alone, ``simulate`` returns a ``SimulatedKernel``, a callable that
launches like the kernel (``sim(a, b)``, ``sim[2](a, b)``, keyword arguments) and returns the kernel's outputs;
kernel parameters it writes are written in place in the passed arrays, as NKI's simulator does. It runs on this
project's engine simulator, so besides the outputs (those of the NumPy reference, bit for bit) the modelled
timing of the last call is in ``sim.profile``. Called with arguments (or ``target=``), ``simulate`` is the
project's function and returns ``(outputs, Profile)``. A zero-argument kernel therefore runs through
``simulate(kernel)()``. The target is ``NEURON_PLATFORM_TARGET_OVERRIDE`` (default trn2) for the callable form.

The kernel may also be a plain Python function whose body uses ``nl``/``nisa`` and calls ``@nki.jit``
sub-kernels, as production libraries structure theirs: it is specialised as a current-API kernel.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.current.jit import CurrentKernel, lnc_grid, platform_target
from nki_dsl.errors import NkiApiError
from nki_dsl.trace.jit import JitKernel, Launch


class SimulatedKernel:
    def __init__(self, kernel, grid: tuple[int, ...] = ()):
        self.kernel = _as_kernel(kernel)
        self.grid = grid
        self.profile = None

    def __getitem__(self, lnc) -> SimulatedKernel:
        if self.grid:
            raise NkiApiError("the LNC degree is given once: nki.simulate(kernel)[2](...)")
        return SimulatedKernel(self.kernel, lnc_grid(lnc))

    def __call__(self, *args, **kwargs):
        args, kwargs, back = _to_numpy(args, kwargs)
        ir, arrays, key = self.kernel.specialize(self.grid, args, kwargs, target=platform_target(self.kernel))
        outputs, self.profile = self.kernel.simulated(ir, key, arrays)
        return back(outputs)

    def __repr__(self) -> str:
        return f"<nki.simulate({self.kernel.fn.__name__}){list(self.grid) or ''}>"


def _as_kernel(kernel) -> JitKernel:
    if isinstance(kernel, Launch):
        raise NkiApiError("pass the kernel itself and the LNC degree to the simulator: nki.simulate(kernel)[2]")
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
    from nki_dsl.profiling import simulate as project_simulate

    return project_simulate(_as_kernel(kernel) if not isinstance(kernel, Launch) else kernel, *args,
                            target=target or platform_target(getattr(kernel, "jit", kernel)), **kwargs)  # fmt: skip


cpu_simulate = simulate
