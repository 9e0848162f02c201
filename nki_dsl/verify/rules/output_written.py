"""Rule ``output-written``: every kernel output is written by some op (reference/nki.md §5.1
``err_tensor_output_not_written_to``). A write through a reshaped view of an output counts."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Access, Kernel, Tensor
from nki_dsl.ir.ops import OPS, Family
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "output-written"
ALIAS_FAMILIES = (Family.RESHAPE,)  # the result is a view of the same storage as its operand


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    root: dict[Tensor, Tensor] = {}
    written: set[Tensor] = set()
    for site in prog.sites:
        op, spec = site.op, OPS[site.op.name]
        if spec.family in ALIAS_FAMILIES and op.result is not None:
            sources = [v.tensor for v in op.operands.values() if isinstance(v, Access)]
            if sources:
                root[op.result] = root.get(sources[0], sources[0])
        for o in spec.writes:
            a = op.operands.get(o.name)
            if isinstance(a, Access):
                written.add(root.get(a.tensor, a.tensor))
    found = []
    for t in kernel.outputs:
        site = prog.defs.get(t)
        if site is None or root.get(t, t) in written:  # an output that views written storage is written
            continue  # a parameter returned as an output holds its input
        msg = f"output {d.tensor(t)} is never written; store the result into it with nl.store(out[...], value=...)"
        found.append(d.diagnostic(site.op, RULE, msg))
    return found
