"""Rule ``sbuf-capacity``: the allocator can place every SBUF tensor of the kernel, exactly.

It asks the allocator's own question (``passes/allocate.fit_one_copy``) of the kernel the allocator sees, through
the ``AllocatorView`` the verifier's caller passes (``verify/allocator_view.py``): the kernel after the
``lower-language`` pass (which adds tiles, such as the SBUF copy of a transposed matmul operand,
and drops others: a result an ``assign`` consumes is written in place). Each tensor takes its bytes per
partition rounded up to the target's alignment, for its program-order live range (a tile made in a loop body
counts once, as the compiler reuses its space each iteration; a tensor used in a loop it was not made in stays
live to that loop's end), one copy each; first fit in program order, then largest first. So the rule refuses
exactly the kernels the allocator cannot place (``tests/verify/test_sbuf_exact.py`` checks both ways on generated
kernels), including those whose live tensors fit in total but leave no hole large enough (fragmentation), which a
sum of live bytes would accept.

The message is given where use peaks when the live tensors exceed a partition, else at the tensor that found no
hole, with the gaps left; both list the tensors live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.allocator_view import AllocatorView
from nki_dsl.verify.program import program

RULE = "sbuf-capacity"


def capacity(target: Target) -> int:
    """SBUF bytes per partition of ``target`` (nki_dsl/targets.py; reference/nki.md §1.1)."""
    return target.sbuf_bytes_per_partition


def check(kernel: Kernel, target: Target, view: AllocatorView) -> list[Diagnostic]:
    misfit, group, size = view.sbuf()
    if misfit is None:
        return []
    limit = capacity(target)
    # Name the traced kernel's ops and tensors where lowering kept them (it keeps names and source lines).
    defs = {t.name: site.op for t, site in program(kernel).defs.items()}

    def item(lv, nbytes: int, where: str = "") -> str:
        return f"{d.tensor(lv.tensor)} ({d.nbytes(nbytes)}{where}, line {lv.op.loc.line})"

    points = sorted({lv.start for lv in group})
    at = max(points, key=lambda x: sum(size(lv) for lv in group if lv.start <= x <= lv.end))
    live = sorted((lv for lv in group if lv.start <= at <= lv.end), key=lambda lv: (-size(lv), lv.start))
    used = sum(size(lv) for lv in live)
    if misfit.size < 0:  # (hostile IR: thousands of tensors live at once; the allocator gives up there too)
        where = misfit.live
        msg = (f"{len(group)} SBUF tensors, so many live at once that placing them examined more than the "
               f"allocator's bound ({view.fit_bound()} tensors) at {d.tensor(where.tensor)}; use fewer, larger "
               f"tiles")  # fmt: skip
    elif used > limit:
        where = max(live, key=lambda lv: lv.start)
        exact = f" ({used} bytes, {used - limit} over)" if used - limit < 1024 else ""  # KiB would hide it
        msg = (f"SBUF use reaches {d.nbytes(used)}{exact} per partition here, more than the {d.nbytes(limit)} a "
               f"{target.name} partition holds; largest live tensors: {d.listing([item(lv, size(lv)) for lv in live])};"
               f" use smaller tiles or end a tensor's use sooner")  # fmt: skip
    else:
        where = misfit.live
        others = sorted(misfit.others, key=lambda o: o[1])
        taken = sum(hi - lo for _, lo, hi in others)
        gaps, end = [], 0
        for _, lo, hi in others:
            gaps.append(lo - end)
            end = max(end, hi)
        gaps.append(limit - end)
        items = [item(o, hi - lo, f" at byte {lo}") for o, lo, hi in others]
        msg = (f"SBUF has no room for {d.tensor(misfit.live.tensor)} ({d.nbytes(misfit.size)} per partition): the "
               f"tensors live with it take {d.nbytes(taken)} of the {d.nbytes(limit)} a {target.name} partition "
               f"holds, but the free space is split into gaps of at most {d.nbytes(max(gaps))} (placed first fit "
               f"in program order, then largest first, as the allocator does); live with it: {d.listing(items)}; "
               f"use smaller tiles or end a tensor's use sooner")  # fmt: skip
    return [d.diagnostic(defs.get(where.tensor.name, where.op), RULE, msg)]
