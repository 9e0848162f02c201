"""How the two NeuronCores of an LNC=2 launch run around ``nisa.sendrecv`` and ``nisa.core_barrier`` (the sync ops,
``ir/ops/collectives.py``; reference/nki.md §2.7 "Multi-core"): each core's program is a coroutine, split at its
sync points.

The choice. Three ways to run two cores that wait on each other were weighed:

* One core after the other (how an SPMD grid runs, §1.5): core 0 would reach a ``sendrecv`` whose data core 1
  has not sent yet. This is why the backends refused sync ops before.
* Lockstep, each op on both cores before the next op: right, but it interleaves every op of the two cores, so
  the JAX backend could no longer keep a loop without sync ops as one ``fori_loop`` / vectorised computation, and
  the NumPy reference would need per-core state in every generated line.
* **Chosen: coroutines split at sync points.** Each core runs until its next sync op and yields a ``Meet``; when
  both cores wait, the driver (``run_cores``) checks that the two requests are the two halves of one exchange,
  hands each core its peer's payload and resumes both. A stretch between two sync points (a *phase*) runs on one
  core at a time, core 0 first.

Why it computes what the hardware computes: both cores run the same program (one trace with ``pid0`` symbolic;
the LNC guide's "cores must run the same control flow", §2.7 ``kernel[N]``), so they meet their sync ops in the
same order, which the verifier's ``core-sync`` rule makes sure of (no sync op under a mask, ranks naming the
peer). Data crosses cores only as a ``sendrecv`` payload, delivered at the meet, or through shared HBM, where a
write by one core is ordered before the other core's access only by a sync point between them. Running the phases
one core after the other therefore gives every ordered access its hardware value; accesses the two cores make in
the same phase race on hardware and get one of their possible outcomes here (core 0's first).

Each backend builds the coroutines its own way: the NumPy reference generates a generator per core
(``backends/numpy_ref/emitter.py``); the JAX backend walks the IR as generators, unrolling at trace time the loops
that contain a sync op (a ``lax.fori_loop`` body cannot pause halfway); the simulator's unroller yields at sync
ops and its driver makes each core's schedule wait for the other's (``backends/simulator/cores.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.errors import NkiRuntimeError, SourceLoc
from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.ir.ops.collectives import SENDRECV, SYNC_OPS

# The kind of a ``Meet`` at the entry of a loop that holds sync ops, for a backend that runs such a loop as one
# computation for both cores (``run_cores``'s ``joint``); the loop and the core's state are its payload.
LOOP = "loop"


@dataclass
class Meet:
    """What a core waiting at a sync op asks of its peer: the op (its IR name and source line), for ``sendrecv``
    the ranks this core named, the pipe and the payload (its ``src``, copied), and the shape and dtype its
    ``dst`` takes."""

    op: str
    loc: SourceLoc
    send_to: int = -1
    recv_from: int = -1
    pipe_id: int = 0
    payload: object = None
    shape: tuple = ()
    dtype: str = ""


def has_sync_ops(kernel: Kernel) -> bool:
    return any(isinstance(s, Op) and s.name in SYNC_OPS for s, _ in kernel.walk())


def contains_sync(loop: Loop) -> bool:
    """Whether ``loop``'s body, at any depth, holds a sync op (backends that run loops as one computation cannot
    pause inside them)."""
    for s in loop.body:
        if isinstance(s, Loop):
            if contains_sync(s):
                return True
        elif s.name in SYNC_OPS:
            return True
    return False


def _where(m: Meet | None) -> str:
    return "has finished" if m is None else f"waits at {m.op} (line {m.loc.line})"


def _mismatch(cores: list[Meet | None]) -> str | None:
    """Why the two requests are not two halves of one exchange (None when they are)."""
    a, b = cores
    if a.op != b.op or a.loc != b.loc:
        return f"core 0 {_where(a)} and core 1 {_where(b)}"
    if a.op != SENDRECV:
        return None
    for c, m in enumerate(cores):
        peer = 1 - c
        if m.send_to != peer or m.recv_from != peer:
            return f"core {c} sends to rank {m.send_to} and receives from rank {m.recv_from}; its peer is core {peer}"
    if a.pipe_id != b.pipe_id:
        return f"core 0 uses pipe {a.pipe_id} and core 1 pipe {b.pipe_id}"
    for c, m in enumerate(cores):
        src = cores[1 - c]
        if tuple(src.payload.shape) != tuple(m.shape):
            return f"core {1 - c} sends {list(src.payload.shape)} into core {c}'s dst {list(m.shape)}"
    return None


def run_cores(cores: list, joint=None):
    """Run the cores' coroutines (generators yielding ``Meet``s and receiving their peer's payload) to the end;
    returns the last core's return value (the kernel's outputs, as the last instance of a grid gives them).
    ``joint(meets) -> replies`` handles the ``LOOP`` meets of a backend that yields them."""
    replies = [None] * len(cores)
    results = [None] * len(cores)
    while True:
        waiting: list[Meet | None] = []
        for c, core in enumerate(cores):
            try:
                waiting.append(core.send(replies[c]))
            except StopIteration as stop:
                results[c] = stop.value
                waiting.append(None)
        if all(m is None for m in waiting):
            return results[-1]
        stuck = next((m for m in waiting if m is not None), None)
        why = "one core has finished" if None in waiting else _mismatch(waiting)
        if why is not None:
            detail = "; ".join(f"core {c} {_where(m)}" for c, m in enumerate(waiting))
            raise NkiRuntimeError(f"the cores of the LNC=2 launch deadlock: {why} ({detail})", stuck.loc, stuck.op)
        if waiting[0].op == LOOP:
            if joint is None:
                raise NkiRuntimeError("internal: a loop meet without a joint runner", stuck.loc, stuck.op)
            replies = joint(waiting)
            continue
        replies = [waiting[m.recv_from].payload if m.op == SENDRECV else None for m in waiting]
