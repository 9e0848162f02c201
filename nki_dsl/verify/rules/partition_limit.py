"""Rule ``partition-limit``: an on-chip tensor or tile spans at most 128 partitions (reference/nki.md §1.2
TC#1, §5.1 ``err_num_partition_exceed_arch_limit``). Tensors are checked where they are defined; accesses only
into tensors that fit, and results only when no operand is already too tall, so one oversized tile is reported
once, where it was made."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.ir.ops import DECLARED, OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import matmul_limits_broken
from nki_dsl.verify.program import program

RULE = "partition-limit"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog, pmax = program(kernel), target.partitions
    found = []
    for site in prog.sites:
        t = site.op.result
        if t is None or not t.type.buffer.on_chip or t.type.partitions <= pmax:
            continue
        if matmul_limits_broken(site.op, OPS[site.op.name], target):
            continue  # the matmul-shape rule names the operand that makes the result too tall
        if any(isinstance(v, Access) and _too_tall(v, pmax) for v in site.op.operands.values()):
            continue  # derived from a tall tile already reported where it was made
        what = "result" if OPS[site.op.name].result is not DECLARED else "tensor"
        msg = f"{what} {d.tensor(t)} has {t.type.partitions} partitions, exceeding the partition limit of {pmax}"
        found.append(d.diagnostic(site.op, RULE, msg + f"; split it into tiles of at most {pmax} partitions"))
    for site, name, a in prog.accesses():
        t = a.tensor.type
        if t.buffer.on_chip and t.partitions <= pmax and a.shape and a.shape[0] > pmax:
            msg = f"{d.operand(name, a)} spans {a.shape[0]} partitions, exceeding the partition limit of {pmax}"
            found.append(d.diagnostic(site.op, RULE, msg))
    return found


def _too_tall(a, pmax: int) -> bool:
    return a.tensor.type.buffer.on_chip and bool(a.shape) and a.shape[0] > pmax
