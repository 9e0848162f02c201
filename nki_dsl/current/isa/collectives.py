"""``nisa.sendrecv`` and ``nisa.core_barrier``: the two cores of an LNC=2 launch (``kernel[2]``) exchanging tiles and
waiting for each other (reference/nki.md §2.7 "Multi-core"). Each emits one sync op (``ir/ops/collectives.py``);
``ir/cores.py`` says how the backends run the cores around them, and the verifier's ``core-sync`` rule refuses
what would deadlock (a sync op one core skips, a rank that is not the peer) or what the hardware lacks
(NeuronCore-v2, a launch without two cores).

Where the reference is silent, choices made here: ``send_to_rank`` / ``recv_from_rank`` may be ints or affine
expressions of ``nl.program_id(0)`` (``1 - nl.program_id(0)``, the way a kernel names its peer), and each must
name the other core: with two cores a core sending to itself would wait for a receive no one posts.
``core_barrier``'s ``data`` is the shared-HBM tensor the barrier orders: accesses to it before the barrier (on
either core) happen before accesses after it.
"""

from __future__ import annotations

from nki_dsl.current.isa.destination import dst_access
from nki_dsl.current.isa.enums import dma_engine, engine, member
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.ops.collectives import BARRIER_ENGINES, CORE_BARRIER, SENDRECV
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.tensor import build_op, is_tile


def _rank(api: str, arg: str, value) -> Affine:
    """A rank as an affine expression of the program id (an int, or ``nl.program_id(0)`` arithmetic)."""
    if isinstance(value, IndexValue) and not value.shape:
        return value.expr
    if isinstance(value, int) and not isinstance(value, bool):
        return Affine.of(value)
    raise NkiApiError(f"{arg}={value!r} must be a core rank: an int or an expression of nl.program_id(0)",
                      caller_loc(), api)  # fmt: skip


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma, name=None):
    """Send this core's ``src`` (SBUF) to the ``dst`` of core ``send_to_rank`` and receive core
    ``recv_from_rank``'s ``src`` into this core's ``dst`` (SBUF, ``src``'s shape and dtype). Both cores must
    execute it; each waits for the other."""
    api = "nisa.sendrecv"
    dst_access(api, dst)
    if not is_tile(src):
        raise NkiApiError(f"'src' must be a tensor, got {type(src).__name__}", caller_loc(), api)
    if isinstance(pipe_id, bool) or not isinstance(pipe_id, int) or pipe_id < 0:
        raise NkiApiError(f"pipe_id={pipe_id!r} must be a non-negative int", caller_loc(), api)
    attrs = {"send_to_rank": _rank(api, "send_to_rank", send_to_rank),
             "recv_from_rank": _rank(api, "recv_from_rank", recv_from_rank), "pipe_id": pipe_id,
             "dma_engine": member(api, "dma_engine", dma_engine, globals()["dma_engine"])}  # fmt: skip
    build_op(SENDRECV, {"src": src, "dst": dst}, attrs)


def core_barrier(data, cores, engine=engine.gpsimd, name=None):
    """Wait on ``engine`` until both cores of the launch reach this barrier; ``data`` (shared HBM) is the tensor
    whose accesses it orders. ``cores`` is ``(0, 1)``."""
    api = "nisa.core_barrier"
    if not is_tile(data):
        raise NkiApiError(f"'data' must be a shared-HBM tensor, got {type(data).__name__}", caller_loc(), api)
    try:
        ranks = tuple(int(c) for c in cores)
    except (TypeError, ValueError):
        raise NkiApiError(f"cores={cores!r} must be a tuple of core ranks", caller_loc(), api) from None
    chosen = member(api, "engine", engine, globals()["engine"])
    if chosen not in BARRIER_ENGINES:
        raise NkiApiError(f"engine={chosen}: a barrier blocks one compute engine here ({', '.join(BARRIER_ENGINES)}); "
                          f"the Sync engine has no timeline in the simulator", caller_loc(), api)  # fmt: skip
    build_op(CORE_BARRIER, {"data": data}, {"cores": ranks, "engine": chosen})
