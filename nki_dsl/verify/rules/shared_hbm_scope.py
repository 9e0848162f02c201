"""Rule ``shared-hbm-scope``: a ``shared_hbm`` tensor is created at the kernel's top level, not inside a loop
(reference/nki.md §5.1 ``err_shared_hbm_must_in_kernel_level``; §1.5: shared HBM is "visible to all kernel
instances in the SPMD grid", one tensor per kernel). A loop body is one region traced once, so a shared tensor
made in it would be one tensor that every iteration re-creates. Scratch HBM inside a loop is ``nl.hbm``
(private to the instance), or the shared tensor moves before the loop and the loop indexes it."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS, Family
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "shared-hbm-scope"
CREATING = (Family.ALLOC, Family.FILL)  # ops that declare a tensor of their own


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    outputs = set(kernel.outputs)  # an output made in a loop is the scope rule's: it is returned after the loop
    for site in program(kernel).sites:
        op = site.op
        if not site.loops or op.result is None or OPS[op.name].family not in CREATING or op.result in outputs:
            continue
        if op.result.type.buffer is not Buffer.SHARED_HBM:
            continue
        msg = (f"{d.tensor(op.result)} is created inside the {d.loop(site.loops[-1])}; a shared_hbm tensor belongs to "
               f"the kernel's top level: create it before the loop (and index it with the loop variable) or use "
               f"nl.hbm for per-iteration scratch")  # fmt: skip
        found.append(d.diagnostic(op, RULE, msg))
    return found
