"""Rule ``scope``: a tile or tensor made inside a loop body is used only inside that loop (reference/nki.md §5.1
"referenced outside of its parent scope"; DESIGN.md "Loop semantics"). The body is traced once, so a Python
variable rebound in the loop and read after it would silently see one iteration's tile."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel, Loop
from nki_dsl.ir.ops import DECLARED, OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import common_depth, program

RULE = "scope"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    found, seen = [], set()
    for t, def_site in prog.defs.items():
        if not def_site.loops:
            continue
        kind = "tensor" if OPS[def_site.op.name].result is DECLARED else "tile"
        for use in prog.uses.get(t, ()):
            k = common_depth(def_site.loops, use.site.loops)
            if k == len(def_site.loops) or (t, k) in seen:
                continue
            seen.add((t, k))
            loop = def_site.loops[k]
            api = d.LOOP_API.get(loop.kind, loop.kind)
            msg = (f"operand '{use.name}' reads {kind} {d.access(use.access)} after the {api} loop at line "
                   f"{loop.loc.line} that made it (line {def_site.op.loc.line}); the loop body is traced once, so "
                   f"after the loop the {kind} holds one iteration's value, and rebinding a variable in the loop "
                   f"(t = t + x) carries nothing across iterations: declare the tensor before the loop and write "
                   f"into it with t[...] = ... (or t[...] += x to accumulate)")  # fmt: skip
            found.append(d.diagnostic(use.site.op, RULE, msg))
    found += _registers(kernel, prog)
    outputs = set(kernel.outputs)
    for t, def_site in prog.defs.items():
        if t in outputs and def_site.loops:
            loop = def_site.loops[0]
            msg = (f"output {d.tensor(t)} is declared inside the {d.LOOP_API.get(loop.kind, loop.kind)} loop at line "
                   f"{loop.loc.line}; declare kernel outputs before any loop")  # fmt: skip
            found.append(d.diagnostic(def_site.op, RULE, msg))
    return found


def _registers(kernel: Kernel, prog) -> list[Diagnostic]:
    """A runtime loop (ir/runtime_loops.py) reads its register where it runs: the register must not be a tile
    made inside a loop that has ended there (the loop's read is not an op, so the uses above do not see it)."""
    found = []
    for stmt, enclosing in kernel.walk():
        if not isinstance(stmt, Loop) or stmt.reads is None:
            continue
        def_site = prog.defs.get(stmt.reads.tensor)
        if def_site is None or not def_site.loops:
            continue
        k = common_depth(def_site.loops, enclosing)
        if k == len(def_site.loops):
            continue
        loop = def_site.loops[k]
        msg = (f"loop {stmt.var} reads its register {d.tensor(stmt.reads.tensor)} after the "
               f"{d.LOOP_API.get(loop.kind, loop.kind)} loop at line {loop.loc.line} that made it (line "
               f"{def_site.op.loc.line}); allocate the register before that loop")  # fmt: skip
        found.append(Diagnostic(stmt.loc, d.LOOP_API.get(stmt.kind, stmt.kind), RULE, msg))
    return found
