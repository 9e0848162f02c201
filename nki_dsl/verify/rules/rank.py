"""Rule ``rank``: an on-chip tile has a partition dimension and at least one free dimension, and at most four
free dimensions (one access pattern); 2-D transposes take 2-D tiles (reference/nki.md §1.2, §1.3, §5.1
"Insufficient rank", ``err_exceed_max_supported_dimension``). Tensors are checked where they are defined,
accesses only into tensors that pass, so each mistake is reported once."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import DECLARED, OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import transpose_rank_error
from nki_dsl.verify.program import program

RULE = "rank"


def _problem(rank: int, max_rank: int) -> str | None:
    if rank < 2:
        return (f"has insufficient rank {rank}: on-chip tiles are at least 2-D (partition dimension first); "
                f"keep a size-1 dimension, e.g. keepdims=True or [0:1, :]")  # fmt: skip
    if rank > max_rank:
        return f"has rank {rank}: an on-chip tile has at most {max_rank - 1} free dimensions"
    return None


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    found, bad = [], set()
    for site in prog.sites:
        t = site.op.result
        if t is not None and t.type.buffer.on_chip:
            problem = _problem(len(t.type.shape) - t.type.par_axis, target.max_tile_rank)
            if problem:
                bad.add(t)
                what = "result" if OPS[site.op.name].result is not DECLARED else "tensor"
                found.append(d.diagnostic(site.op, RULE, f"{what} {d.tensor(t)} {problem}"))
        odd = transpose_rank_error(site.op, OPS[site.op.name])
        if odd is not None:
            name, a = odd
            msg = f"{d.operand(name, a)} has {len(a.shape)} dimensions; {site.op.name} transposes 2-D tiles only"
            found.append(d.diagnostic(site.op, RULE, msg))
    for site, name, a in prog.accesses():
        if a.tensor.type.buffer.on_chip and a.tensor not in bad:
            problem = _problem(len(a.shape), target.max_tile_rank)
            if problem:
                found.append(d.diagnostic(site.op, RULE, f"{d.operand(name, a)} {problem}"))
    return found
