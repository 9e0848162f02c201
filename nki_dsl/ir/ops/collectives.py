"""Op table entries for the instructions between the two NeuronCores of an LNC=2 launch (reference/nki.md §2.7
"Multi-core"): ``nisa.sendrecv`` and ``nisa.core_barrier``. Both are *sync ops*: a core executing one waits for
its peer to reach the matching one (``nki_dsl/ir/cores.py`` says how the backends run the cores around them).

* ``sendrecv``: this core's ``src`` goes into the ``dst`` of core ``send_to_rank``, and core ``recv_from_rank``'s
  ``src`` into this core's ``dst``; both SBUF, one shape and dtype. The ranks are affine in ``pid0`` (a kernel
  writes ``1 - nl.program_id(0)``), ``pipe_id`` names the synchronised group, ``dma_engine`` the queues that move
  it (``dma``, or the GpSimd's ``gpsimd_dma`` with its per-partition size limit).
* ``core_barrier``: each core signals the other's semaphore and waits for the other's signal; ``data`` is the
  shared-HBM tensor the barrier orders (read and written here, so accesses to it before and after the barrier
  stay on their side of it on every backend); only ``engine`` waits.
"""

from __future__ import annotations

from nki_dsl.ir.ops.spec import HBM, AttrKind, AttrSpec, Family, OperandSpec, OpSpec, Role
from nki_dsl.ir.types import Buffer

SBUF = (Buffer.SBUF,)
SENDRECV, CORE_BARRIER = "nisa.sendrecv", "nisa.core_barrier"
SYNC_OPS = frozenset({SENDRECV, CORE_BARRIER})
DMA_ENGINES = ("dma", "gpsimd_dma")  # nisa.dma_engine (§2.6, §2.7 "Enums")
# The engines a barrier may block (§2.7 core_barrier: "blocks only engine", default gpsimd); the Sync engine has
# no timeline in the simulator (backends/simulator/units.py), so it is not offered.
BARRIER_ENGINES = ("gpsimd", "vector", "scalar", "tensor")

COLLECTIVE_OPS = [
    OpSpec(SENDRECV, Family.INSTRUCTION,
           (OperandSpec("src", buffers=SBUF), OperandSpec("dst", role=Role.OUT, buffers=SBUF)),
           (AttrSpec("send_to_rank", AttrKind.AFFINE), AttrSpec("recv_from_rank", AttrKind.AFFINE),
            AttrSpec("pipe_id", AttrKind.INT, 0),
            AttrSpec("dma_engine", AttrKind.STR, "dma", choices=DMA_ENGINES)),
           result=None, engine="dma",
           doc="src to core send_to_rank's dst; core recv_from_rank's src into dst (LNC=2, waits for the peer)"),
    OpSpec(CORE_BARRIER, Family.INSTRUCTION,
           (OperandSpec("data", role=Role.INOUT, buffers=HBM),),
           (AttrSpec("cores", AttrKind.INTS), AttrSpec("engine", AttrKind.STR, "gpsimd", choices=BARRIER_ENGINES)),
           result=None, engine="gpsimd",
           doc="wait until both cores reach it (LNC=2); orders the accesses to shared-HBM data around it"),
]  # fmt: skip
