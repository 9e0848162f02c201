"""Rule ``affine-dependence``: the iterations of an ``affine_range`` loop are independent (reference/nki.md §1.4,
DESIGN.md "Loop semantics"). Only accumulation (``+=``) into a tensor declared outside the loop may carry a value
from one iteration to the next. Three ways to break that, for a tensor declared outside loop L:

* a plain write whose index does not use L's index: every iteration writes the same elements (and when L also
  reads the tensor, ``t[...] = t + x``, each iteration reads what the one before wrote);
* a plain write and a read inside L that two different iterations of L may aim at one element: one iteration
  reads what another writes;
* a read inside L of elements another iteration of L accumulates into: the partial sum depends on the order.

"May aim at one element" is decided on the affine index maps (``verify/iteration_overlap.py``), not by comparing
index text: ``buf[g, :, ds(256*j, 256)]`` written and ``buf[g, :, ds(128*m, 128)]`` read in ``affine_range(g)`` are
disjoint across iterations of g, and reading ``acc[g]`` after the inner loop that accumulates into it is reading
this iteration's own sum.

An HBM tensor and its dtype views (``t.view(dtype)``, ir/hbm_views.py) are one storage: their accesses are
compared as accesses of its bytes (``hbm_views.in_bytes``), so a write through an int32 view and a read of the
float32 tensor in another iteration are a dependence like any other.
"""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir import hbm_views
from nki_dsl.ir.affine import format_affine
from nki_dsl.ir.indirect import widened
from nki_dsl.ir.nodes import Access, Kernel, Loop
from nki_dsl.ir.ops import OPS, Role
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.iteration_overlap import Side, meet_in_different_iterations
from nki_dsl.verify.program import Program, Site, common_depth, program

RULE = "affine-dependence"

Ref = tuple[Site, str, Access]


def is_accumulation(op, spec) -> bool:
    """An op whose spec has an ``accumulate`` attribute set to anything but a plain write."""
    if not any(a.name == "accumulate" for a in spec.attrs):
        return False
    return op.attrs.get("accumulate") not in ("none", False)


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    roots = hbm_views.dtype_roots(kernel)
    spaces = {r: hbm_views.byte_tensor(r) for r in set(roots.values())}

    def storage(t):  # the key accesses of one storage share
        r = roots.get(t)
        return t if r is None else spaces[r]

    def comparable(a: Access) -> Access:
        r = roots.get(a.tensor)
        return a if r is None else hbm_views.in_bytes(a, spaces[r])

    found = []
    writes: dict[tuple[Loop, object], list[Ref]] = {}
    reads: dict[tuple[Loop, object], list[Ref]] = {}
    accums: dict[tuple[Loop, object], list[Ref]] = {}
    same_elements: list[tuple[Ref, list[Loop]]] = []
    for site, name, a in prog.accesses():
        a = widened(site.op, name, a)  # an indirect DMA may touch any row of its indexed dimension
        spec = OPS[site.op.name]
        role = spec.operand(name).role
        same: list[Loop] = []
        for loop in _loops_outside_definition(prog, site, roots.get(a.tensor, a.tensor)):
            key = (loop, storage(a.tensor))
            if role.reads:
                reads.setdefault(key, []).append((site, name, a))
            if role is Role.OUT and is_accumulation(site.op, spec):
                accums.setdefault(key, []).append((site, name, a))
            elif role.writes:
                writes.setdefault(key, []).append((site, name, a))
                if loop.var not in a.vars():
                    same.append(loop)
        if same:
            same_elements.append(((site, name, a), same))
    for ref, loops in same_elements:
        read = next((r for lp in loops for r in reads.get((lp, storage(ref[2].tensor)), ())), None)
        found.append(_carried(ref, read, loops) if read else _same_elements(ref, loops))
    for key, ws in writes.items():
        found += _read_write(key[0], ws, reads.get(key, []), kernel.grid, comparable)
    for key, acc in accums.items():
        clash = _first_meeting(key[0], acc, reads.get(key, []), kernel.grid, comparable)
        if clash is not None:
            found.append(_read_accumulating(key[0], *clash))
    return found


def _first_meeting(loop: Loop, ws: list[Ref], rs: list[Ref], grid, comparable) -> tuple[Ref, Ref] | None:
    """The first (write, read) pair that two different iterations of ``loop`` may aim at one element (compared as
    ``comparable`` gives the accesses: of their storage's bytes when it has dtype views)."""
    for w in ws:
        for r in rs:
            a, b = Side(comparable(w[2]), w[0].loops), Side(comparable(r[2]), r[0].loops)
            if meet_in_different_iterations(loop, a, b, grid):
                return w, r
    return None


def _loops_outside_definition(prog: Program, site: Site, tensor) -> list[Loop]:
    """The affine loops (with more than one iteration) that enclose this access but not the definition of
    ``tensor`` (the accessed tensor's storage)."""
    def_site = prog.defs.get(tensor)
    k = common_depth(def_site.loops, site.loops) if def_site is not None else 0
    return [lp for lp in site.loops[k:] if lp.kind == "affine" and lp.trip_count > 1]


def _same_elements(ref: Ref, loops: list[Loop]) -> Diagnostic:
    site, name, a = ref
    indices = " and ".join(lp.var for lp in loops)
    fix = "accumulate with t[...] += x" if a.tensor.type.buffer.on_chip else "store once after the loop"
    msg = (f"{d.operand(name, a)} writes the same elements in every iteration of {d.loops(loops)}, so the result "
           f"depends on which iteration runs last; index the write with {indices}, {fix}, or use "
           f"nl.sequential_range")  # fmt: skip
    return d.diagnostic(site.op, RULE, msg)


def _carried(ref: Ref, read: Ref, loops: list[Loop]) -> Diagnostic:
    """``t[...] = t + x``: a value carried from one iteration to the next through ``t``."""
    site, name, a = ref
    rsite, rname, _ = read
    reader = f"line {rsite.op.loc.line}, operand '{rname}' of {rsite.op.name}"
    msg = (f"{d.tensor(a.tensor)} is read ({reader}) and written here (operand '{name}') in every iteration "
           f"of {d.loops(loops)}: each iteration reads what the one before wrote, a loop-carried "
           f"dependence that affine_range does not allow; accumulate with t[...] += x, or use "
           f"nl.sequential_range")  # fmt: skip
    return d.diagnostic(site.op, RULE, msg)


def _read_write(loop: Loop, ws: list[Ref], rs: list[Ref], grid, comparable) -> list[Diagnostic]:
    # A write that ignores the loop's index is already reported as a write to the same elements.
    clash = _first_meeting(loop, [w for w in ws if loop.var in w[2].vars()], rs, grid, comparable)
    if clash is None:
        return []
    (wsite, wname, w), (rsite, _, r) = clash
    alias = "" if w.tensor is r.tensor else f" ({d.ref(w.tensor)} and {d.ref(r.tensor)} are views of the same bytes)"
    msg = (f"{d.operand(wname, w)} writes at {_index(w)} while line {rsite.op.loc.line} reads "
           f"{d.ref(r.tensor)} at {_index(r)} in the same {d.loop(loop)}{alias}: one iteration reads what "
           f"another writes; use nl.sequential_range")  # fmt: skip
    return [d.diagnostic(wsite.op, RULE, msg)]


def _read_accumulating(loop: Loop, acc: Ref, read: Ref) -> Diagnostic:
    rsite, rname, r = read
    msg = (f"reads {d.access(r)} (operand '{rname}') inside {d.loop(loop)}, which accumulates into it at line "
           f"{acc[0].op.loc.line}: the partial sum depends on the iteration order; read it after the loop, or use "
           f"nl.sequential_range")  # fmt: skip
    return d.diagnostic(rsite.op, RULE, msg)


def _index(a: Access) -> str:
    return "[" + ", ".join(format_affine(e) for e in a.index) + "]"
