"""Rule ``partition-mismatch``: the tiles of an elementwise op span the same partitions; a one-partition tile
may be broadcast across them, and a stored or assigned value must cover its destination's partitions
(reference/nki.md §1.2, §5.1 ``err_num_partition_mismatch``)."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import partition_conflict
from nki_dsl.verify.program import program

RULE = "partition-mismatch"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        conflict = partition_conflict(site.op, OPS[site.op.name])
        if conflict is None:
            continue
        (an, a), (bn, b) = conflict
        msg = (f"number of partitions (dimension 0 of a tile) differs between {d.operand(an, a)} and "
               f"{d.operand(bn, b)}: {a.shape[0]} vs {b.shape[0]}; only a tile with one partition is "
               f"broadcast across partitions")  # fmt: skip
        found.append(d.diagnostic(site.op, RULE, msg))
    return found
