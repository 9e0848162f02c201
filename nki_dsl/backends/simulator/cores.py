"""The two NeuronCores of an LNC=2 launch simulated together: each core's instruction stream on its own scheduler
(its own engines, DMA queues and memories), the two waiting for each other at the sync ops (``ir/cores.py``).

Each core's unroller is a generator that schedules its instructions one by one and yields at a sync op. When both
cores wait at one, the driver asks each scheduler when the op could start there (its timeline free, its data
ready: the core's *arrival*) and schedules it on both cores from the later arrival:

* ``sendrecv``: each core's transfer of its ``src`` into the peer's ``dst`` is an SBUF-to-SBUF DMA of that tile,
  priced as any DMA (§3.4: the ~1300 ns fixed cost, then the bytes at the DMA engines' rate, on the core's own
  DMA engines and queue; the reference gives no figure of its own for the transfer between cores). It starts when
  both cores have arrived (the data is there and the receiving tile is free on both), and both cores' ``dst``
  are written when the slower of the two transfers ends (each receives the other's), so both sendrecvs end then.
  ``dma_engine=gpsimd_dma`` is priced the same: the reference gives its size limit, not its speed.
* ``core_barrier``: each core's engine issues the barrier when it arrives and is blocked until the later core's
  signal has reached it. A signal is a semaphore write into the other core (§2.7: "each core signals the other's
  semaphore then waits"); the reference gives no barrier latency, so the signal is priced as the documented
  semaphore-to-start cost of a DMA transfer (§3.4, ~1300 ns, ``Target.dma_fixed_ns``). Only that engine waits
  (§2.7 "blocks only engine"); the barrier reads and writes ``data``, so accesses to it wait on either side.

Contention between the two cores (for HBM bandwidth) is not modelled, as for independent cores
(``current/simulate.py``). Loops holding a sync op are scheduled instruction by instruction (``steady.py`` does
not advance them).
"""

from __future__ import annotations

import gc

from nki_dsl.backends.simulator.profile import Profile, build
from nki_dsl.backends.simulator.scheduler import Scheduler
from nki_dsl.backends.simulator.steady import Steady
from nki_dsl.errors import NkiRuntimeError
from nki_dsl.ir.ops.collectives import SENDRECV


def profile_cores(prepared, cells: dict, steady: bool = True, trips=None) -> list[Profile]:
    """One Profile per core of ``prepared``'s launch, the cores simulated together (``trips``: the runtime loops'
    recorded trip counts, as ``Stream.run`` takes them)."""
    t = prepared.target
    cores = []
    for core in range(prepared.lowered.grid[0]):
        stream = prepared.stream((core,))
        log = [] if steady and stream.steady else None
        sched = Scheduler(t, untracked=stream.untracked(), cells=cells, log=log)
        ctl = Steady(stream, sched, log) if log is not None else None
        cores.append((sched, ctl, stream.program(sched.step, ctl, trips)))
    enabled = gc.isenabled()
    gc.disable()  # as ``simulator._profile``: many small acyclic records
    try:
        _drive(t, cores)
    finally:
        if enabled:
            gc.enable()
    out = []
    for sched, ctl, _ in cores:
        done = sched.finish()
        done.advanced = ctl.advanced if ctl is not None else 0
        out.append(build(prepared.lowered.name, t, done))
    return out


def _drive(target, cores) -> None:
    while True:
        waiting = []
        for _, _, program in cores:
            try:
                waiting.append(next(program))
            except StopIteration:
                waiting.append(None)
        if all(w is None for w in waiting):
            return
        ops = {id(w[0].op) if w is not None else None for w in waiting}
        if len(ops) != 1:  # the verifier's core-sync rule keeps verified kernels from this
            first = next(w[0] for w in waiting if w is not None)
            raise NkiRuntimeError("the cores of the LNC=2 launch do not meet at the same sync op", first.loc,
                                  first.opcode)  # fmt: skip
        scheds = [c[0] for c in cores]
        arrivals = [s.arrival(*w) for s, w in zip(scheds, waiting)]
        meet = max(arrivals)
        if waiting[0][0].opcode == SENDRECV:
            for s, w in zip(scheds, waiting):
                s.not_before(w[0], meet)
                s.step(*w)
            end = max(s.arrays[3][-1] for s in scheds)
        else:
            for s, w in zip(scheds, waiting):
                s.step(*w)  # issued on arrival
            end = meet + target.dma_fixed_ns  # the later core's signal reaches its peer (module docstring)
        for s, w in zip(scheds, waiting):
            s.hold_last(end, w[1], w[2])
