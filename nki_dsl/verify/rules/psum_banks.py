"""Rule ``psum-banks``: at most 8 PSUM banks are in use at any point of the program (reference/nki.md §1.1).
Each PSUM tile occupies whole banks: ``ceil(free bytes / 2 KiB)`` per block. Liveness follows program order
(``Program.live_ranges``); the message is given where use peaks and lists the tensors live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.types import TensorType
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import peak, program
from nki_dsl.verify.rules.psum_tile_size import tile_bytes

RULE = "psum-banks"


def banks(t: TensorType, bank_bytes: int) -> int:
    blocks = 1
    for s in t.block_shape:
        blocks *= s
    return blocks * max(1, -(-tile_bytes(t) // bank_bytes))


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    ranges = program(kernel).live_ranges("psum")
    bank_bytes = target.psum_bank_bytes
    used = peak(ranges, lambda r: banks(r.tensor.type, bank_bytes))
    if used.total <= target.psum_banks:
        return []
    items = d.live_tensors(used.live, lambda t: d.plural(banks(t.type, bank_bytes), "bank"))
    msg = (f"{used.total} PSUM banks are in use here, more than the {target.psum_banks} a NeuronCore has "
           f"({bank_bytes} bytes per partition each); live PSUM tensors: {d.listing(items)}; "
           f"copy results out of PSUM (nl.copy) sooner or reuse one accumulator")  # fmt: skip
    return [d.diagnostic(used.site.op, RULE, msg)]
