"""Rule ``operand-buffer``: every tile operand lives in a buffer its op can read or write, and every result in
the buffer the op produces (reference/nki.md §1.1, §5.1 ``err_unsupported_memory``): loads read HBM, stores write
HBM, the Tensor engine reads SBUF and writes PSUM, compute engines work on SBUF and PSUM only."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic, SourceLoc
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import DECLARED, OPS
from nki_dsl.ir.ops.spec import HBM, Family, Role
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "operand-buffer"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site, name, a in program(kernel).accesses():
        spec = OPS[site.op.name]
        allowed = spec.operand(name).buffers
        buf = a.tensor.type.buffer.value
        if buf not in allowed:
            tile = f"{d.ref(a.tensor)}{d.dims(a.shape)}"
            msg = f"operand '{name}' {tile} is in '{buf}'; expected {d.buffers(allowed)}"
            found.append(d.diagnostic(site.op, RULE, msg + _hint(spec, name, buf, allowed)))
    for site in program(kernel).sites:
        spec, t = OPS[site.op.name], site.op.result
        produces = spec.result_buffer(site.op.attrs)
        if t is not None and produces not in (None, DECLARED) and t.type.buffer != produces:
            msg = f"result {d.typed(t)} is declared in '{t.type.buffer.value}'; {spec.name} produces a tile in "
            found.append(d.diagnostic(site.op, RULE, msg + f"'{produces}'"))
    loc = SourceLoc(kernel.source_file, 0)
    for p in kernel.params:
        if p.type.buffer.on_chip:
            found.append(Diagnostic(loc, "kernel", RULE, f"parameter {d.tensor(p)} must live in HBM"))
    defs = program(kernel).defs
    for t in kernel.outputs:
        if t.type.buffer.on_chip:
            site = defs.get(t)
            where = (site.op.loc, site.op.name) if site else (loc, "kernel")
            msg = f"output {d.tensor(t)} must live in HBM; declare it with buffer=nl.shared_hbm"
            found.append(Diagnostic(*where, RULE, msg))
    return found


def _hint(spec, name: str, buf: str, allowed) -> str:
    on_chip = buf in ("sbuf", "psum")
    if set(allowed) <= set(HBM):  # loads, stores, reshapes of HBM tensors (assign operands are all on-chip)
        if spec.family is Family.STORE:
            return " (nl.store writes to HBM; write an on-chip tensor with t[...] = value)"
        return f" ({spec.name} moves data from HBM; copy on-chip tiles with nl.copy)"
    if spec.family is Family.ASSIGN and spec.operand(name).role is Role.OUT and not on_chip:
        return " (t[...] = value writes on-chip tensors; write to HBM with nl.store)"
    if not on_chip:
        return " (nl.load it into SBUF first)"
    if buf == "psum" and allowed == (Buffer.SBUF,):
        return " (the Tensor engine reads SBUF only; nl.copy the PSUM tile to SBUF first)"
    return ""
