"""Rule ``psum-banks``: at most 8 PSUM banks are in use at any point of the program (reference/nki.md §1.1).
The physical buffers and their live ranges are ``verify/psum_buffers.py``'s (each PSUM tile takes whole banks,
blocks with disjoint live ranges share, kernel-placed tensors count their banks once); the message is given where
use peaks and lists the buffers live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program
from nki_dsl.verify.psum_buffers import PsumBuffer, peak_banks, psum_buffers

RULE = "psum-banks"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    used = peak_banks(psum_buffers(program(kernel), target))
    if used.total <= target.psum_banks:
        return []
    items = [_item(b) for b in used.live]
    msg = (f"{used.total} PSUM banks are in use here, more than the {target.psum_banks} a NeuronCore has "
           f"({target.psum_bank_bytes} bytes per partition each); live PSUM tensors: {d.listing(items)}; "
           f"copy results out of PSUM (nl.copy) sooner or reuse one accumulator")  # fmt: skip
    return [d.diagnostic(used.site.op, RULE, msg)]


def _item(b: PsumBuffer) -> str:
    t = b.live.tensor
    what = d.plural(b.banks, "bank")
    if b.block_local is not None:
        what += f" shared by its blocks, one per iteration of the loop at line {b.block_local.loop.loc.line}"
    elif b.fixed is not None:
        what += f" placed at {', '.join(map(str, sorted(b.fixed)))}"
    return f"{d.tensor(t)} ({what}, line {b.live.site.op.loc.line})"
