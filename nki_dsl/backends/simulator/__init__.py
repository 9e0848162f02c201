"""The engine simulator: runs a kernel's engine instructions on a cost model of one NeuronCore.

``simulate(kernel, arrays, target, grid)`` takes the traced kernel IR, lowers it with the pass pipeline
(``lower-language``: nl ops -> engine instructions) and places it with the allocator, both cached per kernel and
target (``prepared.py``), then returns ``(outputs, Profile)``. With arrays it is the numbers-and-timing mode: the
outputs come from the NumPy reference run of the lowered IR, so the simulator computes what it times (and the
lowering is bit-identical to the traced IR for float32 kernels). With ``arrays=None`` it is timing-only: only shapes
and dtypes are needed (``nki.spec``), so sizes too large to compute on a CPU still simulate.

As a registered backend (``kernel(a, b, backend="simulator")``) ``compile_kernel`` returns an executable whose
``run`` returns the outputs and keeps the run's profile in ``.profile``; ``emit_source`` is the per-instruction
listing (engine, instruction, shape, modelled duration).

Pipeline: ``prepared`` (lower, allocate) -> ``stream`` (generated unroller; templates priced once by ``cost``;
regions by address from ``addresses``) -> ``scheduler`` (event driven, ``deps`` for RAW/WAR/WAW; ``steady`` advances
loops whose schedule has started repeating by arithmetic, ``loop_facts`` says which loops qualify) -> ``profile``.
"""

from __future__ import annotations

import gc

from nki_dsl.backends.simulator.addresses import PSUM_KEY, SBUF_KEY
from nki_dsl.backends.simulator.cores import profile_cores as profile_cores_together
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.backends.simulator.profile import Profile, build
from nki_dsl.backends.simulator.scheduler import Scheduler
from nki_dsl.backends.simulator.steady import Steady
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target

# Dependence-tracking cells of the on-chip address spaces: all partitions by a span of bytes. A PSUM bank (2 KiB)
# is the unit PSUM tiles are placed in; SBUF tiles are commonly 256 B - 4 KiB per partition, 1 KiB keeps a tile
# to a few cells.
_SBUF_CELL_BYTES = 1024


def _cells(t: Target) -> dict:
    return {SBUF_KEY: _SBUF_CELL_BYTES, PSUM_KEY: t.psum_bank_bytes}


def simulate(kernel: Kernel, arrays: dict | None, target: Target, grid=None):
    """Outputs (None in timing-only mode) and the Profile of traced ``kernel`` on ``target``.

    ``grid``: None simulates every SPMD instance one after another on one core (NKI runs the instances of a
    launch grid serially on a NeuronCore, reference/nki.md §1.5); a tuple of program ids simulates only that one.
    An LNC=2 kernel whose cores meet at sync ops cannot run its cores one after the other: its two cores are
    simulated together (``cores.py``) and the Profile is the asked-for core's, else the slower one's.
    """
    prepared = prepare(kernel, target)
    outputs = prepared.run_numbers(arrays) if arrays is not None else None
    # runtime loops run as many iterations as that run took (timing only: their declared bounds)
    trips = prepared.numpy.trips.counts if arrays is not None else None
    return outputs, _profile(prepared, grid, trips=trips)


def profile(kernel: Kernel, target: Target, grid=None, steady: bool = True) -> Profile:
    """Timing only. ``steady=False`` schedules every instruction one by one (no loop iterations advanced by
    arithmetic, ``steady.py``): the reference the fast path is tested against."""
    return _profile(prepare(kernel, target), grid, steady)


def profile_cores(kernel: Kernel, target: Target, steady: bool = True, trips=None) -> list[Profile]:
    """Timing only, one Profile per core of an LNC launch (``kernel.grid == (cores,)``), each core on its own
    NeuronCore model. Cores that meet at sync ops (``nisa.sendrecv``, ``nisa.core_barrier``) are simulated
    together, each waiting for the other there (``cores.py``); cores that never meet, one after the other."""
    prepared = prepare(kernel, target)
    if prepared.stream((0,)).has_sync:
        return profile_cores_together(prepared, _cells(target), steady, trips)
    return [_profile(prepared, (core,), steady, trips) for core in range(kernel.grid[0])]


def _profile(prepared, grid, steady: bool = True, trips=None) -> Profile:
    t = prepared.target
    stream = prepared.stream(grid)
    if stream.has_sync:  # the cores wait for each other: simulated together; the asked-for core's, else the slower
        cores = profile_cores_together(prepared, _cells(t), steady, trips)
        return cores[grid[0]] if grid is not None else max(cores, key=lambda p: p.latency_ns)
    log = [] if steady and stream.steady else None
    sched = Scheduler(t, untracked=stream.untracked(), cells=_cells(t), log=log)
    # The run allocates many small records that live until it ends and form no cycles: the cyclic collector would
    # only rescan them again and again (a third of the run time on large kernels).
    enabled = gc.isenabled()
    gc.disable()
    try:
        ctl = Steady(stream, sched, log) if log is not None else None
        stream.run(sched.step, ctl, trips)
    finally:
        if enabled:
            gc.enable()
    done = sched.finish()
    done.advanced = ctl.advanced if ctl is not None else 0
    return build(prepared.lowered.name, t, done)


def emit_source(kernel: Kernel, target: Target) -> str:
    """One line per instruction op: engine, instruction, shapes and modelled duration of one execution."""
    stream = prepare(kernel, target).stream()
    lines = [f"# {kernel.name} on {target.name}: {stream.count()} instructions per launch"]
    for s in stream.templates:
        dims = f"P={s.P} N={s.N}" + (f" Ns={s.n_stationary} Nm={s.n_moving}" if s.n_moving else "")
        dma = f" bytes={s.nbytes} engines={s.dma_engines}" if s.is_dma else ""
        lines.append(f"{s.engine:7} {s.opcode:28} {s.dtype:9} {dims}{dma} {s.duration_ns:.1f} ns  # {s.loc}")
    return "\n".join(lines) + "\n"


class Executable:
    def __init__(self, kernel: Kernel, target: Target):
        self.kernel = kernel
        self.target = target
        self.profile: Profile | None = None

    def run(self, arrays: dict):
        outputs, self.profile = simulate(self.kernel, arrays, self.target)
        return outputs


def compile_kernel(kernel: Kernel, target: Target) -> Executable:
    return Executable(kernel, target)


__all__ = ["simulate", "profile", "profile_cores", "Profile", "compile_kernel", "emit_source", "Scheduler"]
