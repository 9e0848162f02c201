"""Rule ``psum-banks``: the allocator can place every PSUM tensor of the kernel in the 8 banks of 2 KiB per
partition (reference/nki.md §1.1), exactly.

Like ``sbuf-capacity`` it asks the allocator's own question (``passes/allocate.fit_one_copy``, sizes in whole
banks) of the kernel the allocator sees, through the ``AllocatorView`` the verifier's caller passes: the kernel
after ``lower-language``, which adds PSUM tiles the traced kernel does not have (the transposed operand of an
``nl.matmul``, a large ``nl.transpose``'s result). The physical buffers are ``verify/psum_buffers.py``'s, which
the allocator's live ranges follow (each PSUM tile takes whole banks, the blocks of a block-local tensor share
one block's banks, a result an ``assign`` consumes takes none, a tensor the kernel placed holds every bank it
touches, and no other tensor may share those). So the rule refuses exactly the kernels the allocator cannot place
(``tests/verify/test_psum_exact.py`` checks both ways on generated kernels): more banks live than there are,
and also, where tensors of several banks are live, free banks that are not next to each other (fragmentation),
which a count of live banks would accept.

The message is given where use peaks when more banks are live than the target has (counted on the traced kernel
first, whose tensors the kernel names, then on the lowered one), else at the tensor that found no room, with the
free runs of banks; all list the PSUM tensors live there."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.allocator_view import AllocatorView
from nki_dsl.verify.program import program
from nki_dsl.verify.psum_buffers import PsumBuffer, peak_banks, psum_buffers

RULE = "psum-banks"
_ADVICE = "copy results out of PSUM (nl.copy) sooner or reuse one accumulator"


def check(kernel: Kernel, target: Target, view: AllocatorView) -> list[Diagnostic]:
    misfit, group, _ = view.psum()
    if misfit is None:
        return []
    # Name the traced kernel's ops where lowering kept the tensor (it keeps names and source lines).
    defs = {t.name: site.op for t, site in program(kernel).defs.items()}
    if misfit.size < 0:  # (hostile IR: thousands of tensors live at once; the allocator gives up there too)
        msg = (f"{len(group)} PSUM tensors, so many live at once that placing them examined more than the "
               f"allocator's bound ({view.fit_bound()} tensors) at {d.tensor(misfit.live.tensor)}; use fewer, "
               f"larger tiles")  # fmt: skip
        return [d.diagnostic(defs.get(misfit.live.tensor.name, misfit.live.op), RULE, msg)]
    for k, lowered in ((kernel, ""), (view.kernel, " once nl ops are lowered to engine instructions")):
        used = peak_banks(psum_buffers(program(k), target))
        if used.total > target.psum_banks:
            items = [_item(b) for b in used.live]
            msg = (f"{used.total} PSUM banks are in use here{lowered}, more than the {target.psum_banks} a NeuronCore "
                   f"has ({target.psum_bank_bytes} bytes per partition each); live PSUM tensors: {d.listing(items)}; "
                   f"{_ADVICE}")  # fmt: skip
            return [d.diagnostic(_traced_op(kernel, used.site.op, defs) if lowered else used.site.op, RULE, msg)]
        if view.kernel is kernel:
            break
    return [_no_room(misfit, target, defs)]


def _traced_op(kernel: Kernel, op, defs: dict):
    """The op of the traced kernel a lowered op stands for: the one that made its result, or, for a temporary
    lowering added (a transposed operand), the op it is named after (``%10_0`` for ``%10``: ``RewriteContext.tile``),
    else the first at its source line (lowering keeps names and lines)."""
    if op.result is not None:
        for name in (op.result.name, op.result.name.rpartition("_")[0]):
            if name in defs:
                return defs[name]
    return next((site.op for site in program(kernel).sites if site.op.loc == op.loc), op)


def _no_room(misfit, target: Target, defs: dict) -> Diagnostic:
    """The tensor first fit found no run of free banks long enough for, though the banks live with it leave
    enough free in all."""
    bank = target.psum_bank_bytes
    held: dict[str, tuple] = {}  # tensor name -> (live range, the banks it holds)
    for o, lo, hi in misfit.others:
        lv, banks = held.get(o.tensor.name, (o, frozenset()))
        held[o.tensor.name] = (lv, banks | frozenset(range(lo // bank, -(-hi // bank))))
    taken = frozenset().union(*(banks for _, banks in held.values()))
    runs, run = [], 0
    for b in range(target.psum_banks):
        run = 0 if b in taken else run + 1
        runs.append(run)
    items = [f"{d.tensor(lv.tensor)} ({_banks(banks)}, line {lv.op.loc.line})"
             for lv, banks in sorted(held.values(), key=lambda x: min(x[1]))]  # fmt: skip
    need = misfit.size // bank
    msg = (f"PSUM has no room for {d.tensor(misfit.live.tensor)} ({d.plural(need, 'bank')}): the tensors live with "
           f"it hold {len(taken)} of the {target.psum_banks} banks, but the free ones are split into runs of at "
           f"most {d.plural(max(runs, default=0), 'bank')} (placed first fit in program order, then largest first, "
           f"as the allocator does); live with it: {d.listing(items)}; {_ADVICE}")  # fmt: skip
    return d.diagnostic(defs.get(misfit.live.tensor.name, misfit.live.op), RULE, msg)


def _banks(banks) -> str:
    return ("bank " if len(banks) == 1 else "banks ") + ", ".join(map(str, sorted(banks)))


def _item(b: PsumBuffer) -> str:
    t = b.live.tensor
    what = d.plural(b.banks, "bank")
    if b.block_local is not None:
        what += f" shared by its blocks, one per iteration of the loop at line {b.block_local.loop.loc.line}"
    elif b.fixed is not None:
        what += f" placed at {', '.join(map(str, sorted(b.fixed)))}"
    return f"{d.tensor(t)} ({what}, line {b.live.site.op.loc.line})"
