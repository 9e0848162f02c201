"""The engine simulator: runs a kernel's instruction stream on a cost model of one NeuronCore.

``simulate(kernel, arrays, target, grid)`` returns ``(outputs, Profile)``. With arrays it is the numbers-and-timing
mode: the outputs come from the NumPy reference (so they are bit-identical to it by construction) and the timing
from the scheduler. With ``arrays=None`` it is timing-only: the kernel was traced from shapes and dtypes
(``nki.spec``) and no data is touched, so sizes too large to compute on a CPU still simulate.

As a registered backend (``kernel(a, b, backend="simulator")``) ``compile_kernel`` returns an executable whose
``run`` returns the outputs and keeps the run's profile in ``.profile``; ``emit_source`` is the per-op
instruction listing (engine, instruction, shape, modelled duration).

Pipeline: ``stream`` (unroll into instructions, templates priced once by ``cost``) -> ``scheduler`` (event driven,
``deps`` for RAW/WAR/WAW) -> ``profile``.
"""

from __future__ import annotations

from nki_dsl.backends.simulator.profile import Profile, build
from nki_dsl.backends.simulator.scheduler import schedule
from nki_dsl.backends.simulator.stream import Stream
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import DEFAULT_TARGET, get_target


def simulate(kernel: Kernel, arrays: dict | None = None, target=DEFAULT_TARGET, grid=None, allocation=None):
    """Outputs (None in timing-only mode) and the Profile of ``kernel`` on ``target``.

    ``grid``: None simulates every SPMD instance one after another on one core (NKI runs the instances of a
    launch grid serially on a NeuronCore, reference/nki.md §1.5); a tuple of program ids simulates only that one.
    ``allocation``: the allocate pass's placements (rotating buffer counts); without one, tensors defined in a
    loop get ``stream.DEFAULT_BUFFERS`` copies."""
    t = get_target(target)
    outputs = None
    if arrays is not None:
        from nki_dsl import backends  # through the registry: backends never import each other

        outputs = backends.load("numpy").compile_kernel(kernel).run(arrays)
    return outputs, profile(kernel, t, grid, allocation)


def profile(kernel: Kernel, target=DEFAULT_TARGET, grid=None, allocation=None) -> Profile:
    """Timing only."""
    t = get_target(target)
    stream = Stream(kernel, t, allocation=allocation, grid=grid)
    sched = schedule(stream.raw(), t, untracked=stream.untracked_reads())
    return build(kernel.name, t, sched)


def emit_source(kernel: Kernel, target=DEFAULT_TARGET) -> str:
    """One line per op: engine, instruction, shapes and modelled duration of one execution."""
    stream = Stream(kernel, get_target(target))
    lines = [f"# {kernel.name} on {get_target(target).name}: {stream.count()} instructions per launch"]
    for t in stream.templates:
        dims = f"P={t.P} N={t.N}" + (f" Ns={t.n_stationary} Nm={t.n_moving}" if t.n_moving else "")
        dma = f" bytes={t.nbytes} engines={t.dma_engines}" if t.is_dma else ""
        lines.append(f"{t.engine:7} {t.opcode:28} {t.dtype:9} {dims}{dma} {t.duration_ns:.1f} ns  # {t.loc}")
    return "\n".join(lines) + "\n"


class Executable:
    def __init__(self, kernel: Kernel, target=DEFAULT_TARGET):
        self.kernel = kernel
        self.target = get_target(target)
        self.profile: Profile | None = None

    def run(self, arrays: dict):
        outputs, self.profile = simulate(self.kernel, arrays, self.target)
        return outputs


def compile_kernel(kernel: Kernel, target=DEFAULT_TARGET) -> Executable:
    return Executable(kernel, target)


__all__ = ["simulate", "profile", "Profile", "compile_kernel", "emit_source", "Stream", "schedule"]
