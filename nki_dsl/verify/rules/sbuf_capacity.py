"""Rule ``sbuf-capacity``: the SBUF tensors live at the same time fit one partition's SBUF. Liveness follows
program order (``Program.live_ranges``); a tile made in a loop body counts once, as the compiler reuses its space
each iteration. The message is given where use peaks and lists the largest tensors live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.placements import physical_bytes
from nki_dsl.verify.program import peak, program

RULE = "sbuf-capacity"


def capacity(target: Target) -> int:
    """SBUF bytes per partition of ``target`` (nki_dsl/targets.py; reference/nki.md §1.1)."""
    return target.sbuf_bytes_per_partition


def _bytes(r) -> int:
    # a directly allocated tensor takes the space its placement names: blocks sharing space by design count once
    placed = physical_bytes(r.site.op)
    return r.tensor.type.bytes_per_partition if placed is None else placed


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    limit = capacity(target)
    ranges = program(kernel).live_ranges("sbuf")
    used = peak(ranges, _bytes)
    if used.total <= limit:
        return []
    weights = {r.tensor: _bytes(r) for r in used.live}
    items = d.live_tensors(used.live, lambda t: d.nbytes(weights[t]))
    msg = (f"SBUF use reaches {d.nbytes(used.total)} per partition here, more than the {d.nbytes(limit)} a "
           f"{target.name} partition holds; largest live tensors: {d.listing(items)}; use smaller tiles or end a "
           f"tensor's use sooner")  # fmt: skip
    return [d.diagnostic(used.site.op, RULE, msg)]
