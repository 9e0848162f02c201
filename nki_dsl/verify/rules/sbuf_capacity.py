"""Rule ``sbuf-capacity``: the SBUF tensors live at the same time fit one partition's SBUF. Liveness follows
program order (``Program.live_ranges``); a tile made in a loop body counts once, as the compiler reuses its space
each iteration. The message is given where use peaks and lists the largest tensors live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic, NkiApiError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import peak, program

RULE = "sbuf-capacity"

# SBUF bytes per partition (reference/nki.md §1.1): trn1 24 MiB = 128 x 192 KiB, trn2 28 MiB = 128 x 224 KiB,
# trn3 32 MiB = 128 x 256 KiB.
SBUF_BYTES_PER_PARTITION = {"trn1": 192 * 1024, "trn2": 224 * 1024, "trn3": 256 * 1024}


def capacity(target: str) -> int:
    try:
        return SBUF_BYTES_PER_PARTITION[target]
    except KeyError:
        raise NkiApiError(f"unknown target {target!r}; expected one of {', '.join(SBUF_BYTES_PER_PARTITION)}") from None


def check(kernel: Kernel, target: str) -> list[Diagnostic]:
    limit = capacity(target)
    ranges = program(kernel).live_ranges("sbuf")
    used, live = peak(ranges, lambda r: r.tensor.type.bytes_per_partition)
    if used <= limit:
        return []
    at = max(live, key=lambda r: r.start).site
    items = [f"{d.tensor(r.tensor)} {d.nbytes(r.tensor.type.bytes_per_partition)} (line {r.site.op.loc.line})"
             for r in live]  # fmt: skip
    msg = (f"SBUF use reaches {d.nbytes(used)} per partition here, more than the {d.nbytes(limit)} a {target} "
           f"partition holds; largest live tensors: {d.listing(items)}; use smaller tiles or end a tensor's use "
           f"sooner")  # fmt: skip
    return [d.diagnostic(at.op, RULE, msg)]
