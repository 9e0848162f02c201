"""Which of a shape family's dimensions its kernel is independent along: the proof a loader needs before it runs a
call above a family's range as several instances over slices (``hub_client/chunks.py``).

A family ``x: [$B, 197, 2304]`` with ``B in 1..256`` whose kernel runs ``affine i0 = range(0, $B, 1)`` and touches
``x`` and its output only at ``[i0, ...]`` computes batch element ``b`` from element ``b`` of its inputs alone, so a
call with ``B = 1000`` gives the same numbers as four calls of ``B = 250`` (or 256, 256, 256, 232) over slices of
its arrays, concatenated. What makes that so, and is checked here on the IR (never taken from a manifest), for a
base symbol ``$X`` (the "X-tensors" are the HBM tensors with ``$X`` among their dimensions; the "X-loops" the loops
whose stop is ``$X``):

1. ``$X`` appears only as a dimension of HBM tensors (at most once per tensor) and as the stop of X-loops: no
   derived symbol, mask, attribute or index uses it, so the kernel's sizes and decisions do not depend on it;
2. every X-loop is an ``affine_range`` from 0 in steps of 1, and none is inside another: its iterations are
   independent by the language's contract (DESIGN.md "Loop semantics": backends reorder, parallelise and
   vectorise them; the verifier's ``affine-dependence`` rule holds every instance to it), so iteration ``b`` sees
   no state another iteration made;
3. every access of an X-tensor indexes its X axis with exactly the index of an enclosing X-loop, and that index
   appears nowhere else (no other axis, no on-chip tensor, no mask): iteration ``b`` touches slot ``b`` of the X
   axes and nothing that depends on ``b`` otherwise; no reshape or dtype view of an X-tensor (its X axis could
   move) and no indirect DMA along an X axis (rows known only at run time);
4. inside an X-loop, ops write (or accumulate into) only X-tensors and tensors defined inside that loop: nothing
   that outlives an iteration is written at a position shared by all of them, so what ops outside the X-loops
   see is the same in every instance, and no parameter is written outside them;
5. every output is an X-tensor, so the instances' outputs are concatenated along their X axes.

Then instance ``n`` and the instances over slices run the same ops outside the X-loops on the same values, and
iteration ``b`` of instance ``n`` is iteration ``b - start`` of the instance over the slice holding ``b``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.indirect import DIM as INDIRECT_DIM
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS

RESHAPING = ("hbm.reshape", "hbm.view")  # ops whose result views another tensor's storage with other axes


@dataclass(frozen=True)
class IndependentDim:
    """Where a dimension the kernel is independent along sits: per parameter its axis (None: the parameter does not
    have it and is passed whole to every instance), per output its axis (each output has it)."""

    params: tuple[int | None, ...]
    outputs: tuple[int, ...]


def independence(kernel: Kernel) -> tuple[dict[str, IndependentDim], dict[str, str]]:
    """``(proved, refused)``: for each base symbol by its label, where it sits when the kernel is independent along
    it, else why not (a sentence naming the first condition of the module docstring it breaks)."""
    proved, refused = {}, {}
    for name, s in kernel.symbols.items():
        if not s.is_base:
            continue
        why = _why_not(kernel, name)
        if why is None:
            proved[s.label] = IndependentDim(tuple(_axis(p, name) for p in kernel.params),
                                             tuple(_axis(t, name) for t in kernel.outputs))  # fmt: skip
        else:
            refused[s.label] = why
    return proved, refused


def _axis(t: Tensor, name: str) -> int | None:
    shape = list(t.type.shape)
    return shape.index(name) if name in shape else None


def _uses(x, name: str) -> bool:
    if isinstance(x, Affine | Mask):
        return name in x.vars()
    if isinstance(x, tuple | list):
        return any(_uses(v, name) for v in x)
    return False


def _accesses(stmt) -> list[tuple[str, Access]]:
    if isinstance(stmt, Loop):
        return [("reads", stmt.reads)] if stmt.reads is not None else []
    return [(n, a) for n, a in stmt.operands.items() if isinstance(a, Access)]


def _why_not(kernel: Kernel, name: str) -> str | None:
    label = name[1:]
    for s in kernel.symbols.values():
        if not s.is_base and name in s.expr.vars():
            return f"the size {s.label} is computed from {label}"
    tensors = {id(p): p for p in kernel.params}
    defined: dict[int, tuple[Loop, ...]] = {id(p): () for p in kernel.params}  # tensor -> loops around its definition
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Op) and stmt.result is not None:
            tensors[id(stmt.result)] = stmt.result
            defined[id(stmt.result)] = loops
    for t in tensors.values():
        if list(t.type.shape).count(name) > 1:
            return f"%{t.name} has {label} on two axes"
    has = {i for i, t in tensors.items() if name in t.type.shape}
    x_vars: set[str] = set()
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Loop) and stmt.stop == name:
            if stmt.kind != "affine" or stmt.start != 0 or stmt.step != 1:
                return f"loop {stmt.var} over {label} is not an affine_range(0, {label}, 1)"
            if any(lp.stop == name for lp in loops):
                return f"loop {stmt.var} over {label} is inside another loop over {label}"
            x_vars.add(stmt.var)
    for stmt, loops in kernel.walk():
        where = f"line {stmt.loc.line}"
        if isinstance(stmt, Op):
            if stmt.mask is not None and (_uses(stmt.mask, name) or stmt.mask.vars() & x_vars):
                return f"the mask at {where} depends on {label}"
            if any(_uses(v, name) or (isinstance(v, Affine | Mask) and v.vars() & x_vars) for v in stmt.attrs.values()):
                return f"an attribute at {where} depends on {label}"
            if stmt.name in RESHAPING and any(id(a.tensor) in has for _, a in _accesses(stmt)):
                return f"{stmt.name} at {where} views a tensor with dimension {label} with other axes"
        enclosing = [lp.var for lp in loops if lp.stop == name]
        for oname, a in _accesses(stmt):
            if name in a.vars():
                return f"an index at {where} uses {label}"
            axis = _axis(a.tensor, name) if id(a.tensor) in has else None
            if axis is not None:
                if not enclosing or a.index[axis] != Affine.var(enclosing[0]):
                    return (f"{where} reads or writes %{a.tensor.name} along {label} at {a.index[axis]}, not at the "
                            f"index of the loop over {label} around it")  # fmt: skip
                indirect = stmt.attrs.get(INDIRECT_DIM) if isinstance(stmt, Op) and oname == hbm_operand(stmt) else None
                if indirect is not None and indirect == axis:
                    return f"the indirect DMA at {where} chooses rows of %{a.tensor.name} along {label} at run time"
            if any(v in x_vars for k, e in enumerate(a.index) if k != axis for v in e.vars()):
                return f"{where} uses the index of the loop over {label} elsewhere than on a {label} axis"
        if isinstance(stmt, Op):
            for oname, a in _accesses(stmt):
                if not OPS[stmt.name].operand(oname).role.writes or id(a.tensor) in has:
                    continue
                inside = next((lp for lp in loops if lp.stop == name), None)
                if inside is not None and inside not in defined.get(id(a.tensor), ()):
                    return (f"{where} writes %{a.tensor.name}, defined outside the loop {inside.var} over {label}, "
                            f"at the same place in every iteration")  # fmt: skip
                if a.tensor.kind == "param":
                    return f"{where} writes parameter %{a.tensor.name}, which has no dimension {label}"
    for t in kernel.outputs:
        if id(t) not in has:
            return f"output %{t.name} has no dimension {label}, so instances over slices cannot be joined"
    if not x_vars and has:
        return f"no loop runs over {label}"
    return None
