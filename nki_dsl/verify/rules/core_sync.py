"""Rule ``core-sync``: ``nisa.sendrecv`` and ``nisa.core_barrier`` (reference/nki.md §2.7 "Multi-core") can run, and
the two cores of the launch meet at each of them in the same order, so none waits forever.

Both cores run the one program of the kernel (``ir/cores.py``), so they reach the same sync ops in the same order
unless one core skips one. This rule refuses what would make a core wait for a partner that never comes:

* a sync op outside an LNC=2 launch (``kernel[2]``: a one-axis grid of two cores), or on NeuronCore-v2 (trn1):
  §2.7 gives both as "v3+ LNC2";
* a sync op under a mask (the mask may hold on one core and not the other: ``pid0`` is in scope) or in a loop
  that is neither ``affine`` nor ``sequential`` (one whose trip count could differ between the cores);
* a ``sendrecv`` rank that is not the peer: each core sends to and receives from the other core (ranks 0/1, §2.7;
  a core sending to itself waits for a receive nobody posts), evaluated for both values of ``pid0``; ranks depend
  on ``pid0`` only (a loop index would make the pairs change under the loop);
* a ``sendrecv`` whose ``src`` and ``dst`` differ in shape or dtype (each core's ``src`` lands in the other's
  ``dst``: "SBUF, same dtype/shape"), or beyond ``dma_engine=gpsimd_dma``'s limit per partition (1024 / 512 /
  256 B for 32 / 16 / 8-bit dtypes, §2.7 sendrecv);
* a barrier whose ``cores`` is not ``(0, 1)`` (§2.7: "cores=(0,1) only"), or whose ``data`` is private to a core
  (an ``nl.private_hbm``/``nl.hbm`` allocation): the barrier orders shared-HBM accesses.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.ir.ops.collectives import SENDRECV, SYNC_OPS
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "core-sync"
CORES = 2  # an LNC=2 launch (§1.5, §2.7 kernel[N])
FIRST_NC_VERSION = 3  # §2.7 sendrecv / core_barrier: "v3+ LNC2"
COUNTED_LOOPS = ("affine", "sequential")


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op = site.op
        if op.name not in SYNC_OPS:
            continue
        problems = _launch(kernel, target)
        launch_ok = not problems
        if op.mask is not None:
            problems.append("it is under a mask, which may let one core run it and not the other: both cores must "
                            "execute every sync op (split the data, not the exchange)")  # fmt: skip
        odd = [lp for lp in site.loops if lp.kind not in COUNTED_LOOPS]
        if odd:
            problems.append(f"it is inside {d.loop(odd[0])}, whose trip count may differ between the cores")
        if launch_ok:  # (the ranks and the pairing mean nothing without two cores)
            problems += _sendrecv(op, target) if op.name == SENDRECV else _barrier(op)
        found += [d.diagnostic(op, RULE, p) for p in problems]
    return found


def _launch(kernel: Kernel, target: Target) -> list[str]:
    out = []
    if tuple(kernel.grid) != (CORES,):
        grid = f"grid {list(kernel.grid)}" if kernel.grid else "no launch grid (one core)"
        out.append(f"it runs between the two cores of an LNC=2 launch (kernel[2](...)); this kernel has {grid}, so "
                   f"its core would wait for a peer that does not exist")  # fmt: skip
    if target.nc_version < FIRST_NC_VERSION:
        out.append(f"it needs NeuronCore-v{FIRST_NC_VERSION} or later (trn2, trn3; LNC=2); {target.name} has "
                   f"NeuronCore-v{target.nc_version}")  # fmt: skip
    return out


def _rank_problems(name: str, e: Affine) -> list[str]:
    if not isinstance(e, Affine):
        return [f"{name} is not an expression of the program id"]
    others = sorted(v for v in e.vars() if v != "pid0")
    if others:
        return [f"{name} = {e} depends on {', '.join(others)}; a rank depends on nl.program_id(0) only"]
    out = []
    for core in range(CORES):
        rank = e.evaluate({"pid0": core})
        peer = CORES - 1 - core
        if rank != peer:
            what = "itself" if rank == core else ("no core of the launch" if not 0 <= rank < CORES else f"core {rank}")
            out.append(f"on core {core}, {name} = {e} is {rank} ({what}); each core exchanges with the other one "
                       f"(core {peer}), or the two would wait for each other forever")  # fmt: skip
    return out


def _sendrecv(op, target: Target) -> list[str]:
    out = _rank_problems("send_to_rank", op.attrs.get("send_to_rank"))
    out += _rank_problems("recv_from_rank", op.attrs.get("recv_from_rank"))
    src, dst = op.operands.get("src"), op.operands.get("dst")
    if not (isinstance(src, Access) and isinstance(dst, Access)):
        return out
    if tuple(src.shape) != tuple(dst.shape) or src.tensor.type.dtype != dst.tensor.type.dtype:
        out.append(f"{d.operand('src', src)} ({src.tensor.type.dtype}) lands in the peer's {d.operand('dst', dst)} "
                   f"({dst.tensor.type.dtype}): they must have one shape and dtype")  # fmt: skip
    if op.attrs.get("dma_engine") == "gpsimd_dma":
        size = dtypes.get(src.tensor.type.dtype).itemsize
        per_partition = size
        for s in src.shape[1:]:
            per_partition *= s
        limit = target.gpsimd_dma_elements * size  # 1024 / 512 / 256 B for 32 / 16 / 8-bit (§2.7 sendrecv)
        if per_partition > limit:
            allowed = ", ".join(f"{target.gpsimd_dma_elements * k} B for {8 * k}-bit" for k in (4, 2, 1))
            out.append(f"dma_engine=gpsimd_dma moves at most {allowed} dtypes per partition; {d.operand('src', src)} "
                       f"is {per_partition} B per partition: use dma_engine=nisa.dma_engine.dma")  # fmt: skip
    return out


def _barrier(op) -> list[str]:
    out = []
    cores = tuple(op.attrs.get("cores", ()))
    if cores != tuple(range(CORES)):
        out.append(f"cores={cores}: a barrier joins both cores of the launch, cores=(0, 1)")
    data = op.operands.get("data")
    if isinstance(data, Access) and data.tensor.kind != "param" and data.tensor.type.buffer != Buffer.SHARED_HBM:
        out.append(f"{d.operand('data', data)} is private to each core; a barrier orders accesses to a shared-HBM "
                   f"tensor (nl.shared_hbm, or a kernel argument)")  # fmt: skip
    return out

