"""Which of a shape family's dimensions its kernel is independent along, and in blocks of what size: the proof a
loader needs before it runs a call above a family's range as several instances over slices
(``hub_client/chunks.py``).

A family ``x: [$B, 197, 2304]`` with ``B in 1..256`` whose kernel runs ``affine i0 = range(0, $B, 1)`` and touches
``x`` and its output only at ``[i0, ...]`` computes batch element ``b`` from element ``b`` of its inputs alone, so a
call with ``B = 1000`` gives the same numbers as four calls of ``B = 250`` (or 256, 256, 256, 232) over slices of
its arrays, concatenated. A row kernel ``x: [$N, 512]`` with ``N in 1..65536`` runs ``affine i0 = range(0, $_0, 1)``
with ``$_0 = ($N + 127) // 128`` and touches rows ``128*i0 + d0`` (``d0`` a tile axis in 0..127) under the mask
``128*i0 + d0 < $N``: it computes each block of 128 rows from that block alone (its ops may mix the rows of a
block: a partition reduction, a transpose), so a call with ``N = 70000`` gives the same numbers as instances over
slices that start at multiples of 128 (65536 and 4464 rows). The plain case is blocks of one.

What makes that so, and is checked here on the IR (never taken from a manifest), for a base symbol ``$X`` (the
"X-tensors" are the tensors with ``$X`` among their dimensions; the "X-loops" the loops whose stop is ``$X``, blocks
of 1, or a derived symbol ``($X + T - 1) // T``, ``ceil(X / T)``, blocks of ``T``):

1. ``$X`` appears only as a dimension of tensors (at most once per tensor), in the derived symbols
   ``($X + T - 1) // T`` and as the stop of X-loops; each such derived symbol appears only as the stop of X-loops;
   no other derived symbol, attribute or index uses either, and a mask only as in 3; so the kernel's sizes and
   decisions do not depend on ``$X``;
2. every X-loop is an ``affine_range`` from 0 in steps of 1, none is inside another, and all have one block size
   ``T``: their iterations are independent by the language's contract (DESIGN.md "Loop semantics": backends
   reorder, parallelise and vectorise them; the verifier's ``affine-dependence`` rule holds every instance to it),
   so iteration ``b`` sees no state another iteration made (a tensor defined inside the loop is its own per
   iteration);
3. every access of an X-tensor indexes its X axis with ``T*i + p``: ``i`` the index of the enclosing X-loop and
   ``p`` an expression in the access's own axes only, ranging within ``0..T-1`` over them, so iteration ``b``
   touches block ``b`` of the X axes alone; the loop's index appears nowhere else (no other axis, no on-chip
   tensor, no attribute) but in mask constraints ``$X - T*i - p - 1 >= 0`` (``T*i + p < $X``, ``p`` in the axes of
   the space the mask ranges over, within ``0..T-1``), which say the same of a block in every instance holding
   it; no reshape or dtype view of an X-tensor (its X axis could move) and no indirect DMA along an X axis
   (rows known only at run time);
4. inside an X-loop, ops write (or accumulate into) only X-tensors and tensors defined inside that loop: nothing
   that outlives an iteration is written at a position shared by all of them, so what ops outside the X-loops
   see is the same in every instance, and no parameter is written outside them;
5. every output is an X-tensor, so the instances' outputs are concatenated along their X axes.

Then instance ``n`` and the instances over slices starting at multiples of ``T`` run the same ops outside the
X-loops on the same values, and iteration ``b`` of instance ``n`` is iteration ``b - start / T`` of the instance
over the slice holding block ``b``: the same rows in, and the same mask, ``T*b + p < n`` holding exactly when
``T*(b - start/T) + p < size`` does (a slice before the last has a multiple of ``T`` rows, all of them whole
blocks; the last ends where the call does).
"""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.affine import Affine, Mask, var_kind
from nki_dsl.ir.indirect import DIM as INDIRECT_DIM
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS, REDUCE_MASK, reduce_mask_operand
from nki_dsl.verify.operands import iteration_shape

RESHAPING = ("hbm.reshape", "hbm.view")  # ops whose result views another tensor's storage with other axes


@dataclass(frozen=True)
class IndependentDim:
    """Where a dimension the kernel is independent along sits: per parameter its axis (None: the parameter does not
    have it and is passed whole to every instance), per output its axis (each output has it); and ``block``, the
    size of the blocks it computes each from that block alone: a slice for an instance starts at a multiple of it,
    and every slice but the last holds a multiple of it."""

    params: tuple[int | None, ...]
    outputs: tuple[int, ...]
    block: int = 1


def independence(kernel: Kernel) -> tuple[dict[str, IndependentDim], dict[str, str]]:
    """``(proved, refused)``: for each base symbol by its label, where it sits when the kernel is independent along
    it (and in blocks of what size), else why not (a sentence naming the first condition of the module docstring
    it breaks)."""
    proved, refused = {}, {}
    for name, s in kernel.symbols.items():
        if not s.is_base:
            continue
        why, block = _why_not(kernel, name)
        if why is None:
            proved[s.label] = IndependentDim(tuple(_axis(p, name) for p in kernel.params),
                                             tuple(_axis(t, name) for t in kernel.outputs), block)  # fmt: skip
        else:
            refused[s.label] = why
    return proved, refused


def _axis(t: Tensor, name: str) -> int | None:
    shape = list(t.type.shape)
    return shape.index(name) if name in shape else None


def _uses(x, names: set[str]) -> bool:
    """Whether an index, mask or attribute value mentions any of ``names`` (symbols or loop indices), also as a
    string (a shape attribute's symbolic size, an accumulation's ``zero_first`` loop)."""
    if isinstance(x, Affine | Mask):
        return bool(x.vars() & names)
    if isinstance(x, str):
        return x in names
    if isinstance(x, tuple | list):
        return any(_uses(v, names) for v in x)
    return False


def _accesses(stmt) -> list[tuple[str, Access]]:
    if isinstance(stmt, Loop):
        return [("reads", stmt.reads)] if stmt.reads is not None else []
    return [(n, a) for n, a in stmt.operands.items() if isinstance(a, Access)]


def _block_stops(kernel: Kernel, name: str) -> tuple[dict[str, int], str | None]:
    """``({stop: T}, why)``: the sizes an X-loop may stop at (``$X`` itself, blocks of 1, and each derived symbol
    ``($X + T - 1) // T``, blocks of T), or why a derived symbol makes a size of ``$X`` that is not one of them."""
    stops = {name: 1}
    for s in kernel.symbols.values():
        if s.is_base or not s.expr.vars() & (stops.keys()):
            continue
        if s.expr.vars() == {name} and s.expr == Affine.var(name) + (s.divisor - 1):
            stops[s.name] = s.divisor
        else:
            return stops, f"the size {s.label} is computed from {name[1:]}"
    return stops, None


def _block_offset(e: Affine, i: str, t: int, extents) -> Affine | None:
    """``p`` when ``e`` is ``T*i + p`` with ``p`` over the axes ``d<k>`` of ``extents`` only and within ``0..T-1``
    for every point of them; None otherwise."""
    if e.coef(i) != t:
        return None
    p = e - Affine.var(i, t)
    ranges = {}
    for v in p.vars():
        k = int(v[1:]) if var_kind(v) == "axis" else None
        if k is None or k >= len(extents) or not isinstance(extents[k], int) or extents[k] < 1:
            return None
        ranges[v] = (0, extents[k] - 1)
    lo, hi = p.bounds(ranges)
    return p if lo >= 0 and hi <= t - 1 else None


def _mask_extents(op: Op) -> tuple:
    """Bounds on the extents of the space an op's mask ranges over (its iteration space, ``verify/operands.py``),
    per axis the largest of that space's and of every access the op writes: a backend that takes the space from
    another written operand than the verifier does still evaluates the mask within them."""
    space = list(iteration_shape(op, OPS[op.name]) or ())
    for o in OPS[op.name].writes:
        a = op.operands.get(o.name)
        if isinstance(a, Access):
            for k, e in enumerate(a.shape[: len(space)]):
                space[k] = max(space[k], e) if isinstance(space[k], int) and isinstance(e, int) else None
    return tuple(space)


def _rows(t: int, i: str) -> str:
    """The rows a block's iteration may touch, as a message says them."""
    return i if t == 1 else f"{t}*{i} + p (p in 0..{t - 1})"


def _mask_problem(mask: Mask | None, extents, name: str, names: set[str], enclosing: Loop | None, t: int,
                  where: str) -> str | None:  # fmt: skip
    """Why a mask (over a space of ``extents``) says something of ``$X`` or the X-loop's index other than
    ``T*i + p < $X`` (condition 3), or None."""
    if mask is None:
        return None
    label = name[1:]
    for c in mask.constraints:
        if not c.vars() & names:
            continue
        if enclosing is None:
            return f"the mask at {where} depends on {label} outside a loop over {label}"
        rows = Affine.var(name) - 1 - c  # T*i + p when c is $X - T*i - p - 1 (else it holds a symbol or index)
        if _block_offset(rows, enclosing.var, t, extents) is None:
            return f"the mask at {where} depends on {label} other than as {_rows(t, enclosing.var)} < {label}: {c} >= 0"
    return None


def _why_not(kernel: Kernel, name: str) -> tuple[str | None, int]:
    label = name[1:]
    # condition 5 first, without walking the body: an output's rank is bounded, so few symbols reach the walks
    # below (a family declaring a thousand dimensions does not make a thousand walks over its ops)
    for t in kernel.outputs:
        if name not in t.type.shape:
            return f"output %{t.name} has no dimension {label}, so instances over slices cannot be joined", 1
    stops, why = _block_stops(kernel, name)
    if why:
        return why, 1
    tensors = {id(p): p for p in kernel.params}
    defined: dict[int, tuple[Loop, ...]] = {id(p): () for p in kernel.params}  # tensor -> loops around its definition
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Op) and stmt.result is not None:
            tensors[id(stmt.result)] = stmt.result
            defined[id(stmt.result)] = loops
    for t in tensors.values():
        shape = list(t.type.shape)
        if shape.count(name) > 1:
            return f"%{t.name} has {label} on two axes", 1
        if any(s in stops for s in shape if s != name):
            return f"%{t.name} has a dimension computed from {label}", 1
    has = {i for i, t in tensors.items() if name in t.type.shape}
    x_vars: set[str] = set()
    blocks: dict[int, str] = {}  # block size -> a loop with it
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Loop) and stmt.stop in stops:
            if stmt.kind != "affine" or stmt.start != 0 or stmt.step != 1:
                return f"loop {stmt.var} over {label} is not an affine_range(0, {stmt.stop[1:]}, 1)", 1
            if any(lp.stop in stops for lp in loops):
                return f"loop {stmt.var} over {label} is inside another loop over {label}", 1
            x_vars.add(stmt.var)
            blocks.setdefault(stops[stmt.stop], stmt.var)
    if len(blocks) > 1:
        (t1, v1), (t2, v2) = sorted(blocks.items())[:2]
        return f"loops over {label} take it in blocks of different sizes ({v1}: {t1}, {v2}: {t2})", 1
    block = next(iter(blocks), 1)
    symbols = set(stops) | x_vars  # what no index or attribute may mention, and a mask only as a block of rows
    for stmt, loops in kernel.walk():
        where = f"line {stmt.loc.line}"
        enclosing = next((lp for lp in loops if lp.stop in stops), None)
        for oname, a in _accesses(stmt):
            if a.vars() & set(stops):
                return f"an index at {where} uses {label}", 1
            axis = _axis(a.tensor, name) if id(a.tensor) in has else None
            if axis is not None:
                if enclosing is None or _block_offset(a.index[axis], enclosing.var, block, a.shape) is None:
                    at = "the index of the loop" if block == 1 else f"{_rows(block, 'i')} with i the index of the loop"
                    return (f"{where} reads or writes %{a.tensor.name} along {label} at {a.index[axis]}, not at {at} "
                            f"over {label} around it"), 1  # fmt: skip
                indirect = stmt.attrs.get(INDIRECT_DIM) if isinstance(stmt, Op) and oname == hbm_operand(stmt) else None
                if indirect is not None and indirect == axis:
                    return f"the indirect DMA at {where} chooses rows of %{a.tensor.name} along {label} at run time", 1
            if any(v in x_vars for k, e in enumerate(a.index) if k != axis for v in e.vars()):
                return f"{where} uses the index of the loop over {label} elsewhere than on a {label} axis", 1
        if isinstance(stmt, Op):
            why = _mask_problem(stmt.mask, _mask_extents(stmt), name, symbols, enclosing, block, where)
            reduced = stmt.operands.get(reduce_mask_operand(OPS[stmt.name]) or "")
            reduced = reduced if isinstance(reduced, Access) else None  # the reduce_mask ranges over its axes
            if why is None and reduced is not None:
                why = _mask_problem(stmt.attrs.get(REDUCE_MASK.name), reduced.shape, name, symbols, enclosing, block,
                                    where)  # fmt: skip
            if why:
                return why, 1
            if any(_uses(v, symbols) for k, v in stmt.attrs.items() if k != REDUCE_MASK.name or reduced is None):
                return f"an attribute at {where} depends on {label}", 1
            if stmt.name in RESHAPING and any(id(a.tensor) in has for _, a in _accesses(stmt)):
                return f"{stmt.name} at {where} views a tensor with dimension {label} with other axes", 1
        if isinstance(stmt, Op):
            for oname, a in _accesses(stmt):
                if not OPS[stmt.name].operand(oname).role.writes or id(a.tensor) in has:
                    continue
                if enclosing is not None and enclosing not in defined.get(id(a.tensor), ()):
                    return (f"{where} writes %{a.tensor.name}, defined outside the loop {enclosing.var} over {label}, "
                            f"at the same place in every iteration"), 1  # fmt: skip
                if a.tensor.kind == "param":
                    return f"{where} writes parameter %{a.tensor.name}, which has no dimension {label}", 1
    if not x_vars and has:
        return f"no loop runs over {label}", 1
    return None, block
