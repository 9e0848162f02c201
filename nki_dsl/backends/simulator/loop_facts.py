"""Which loops of the instruction stream ``steady.py`` may advance by whole iterations, and what it needs of them.

A loop qualifies when one iteration of its body is the previous one moved along in a way the scheduler's state can
follow by arithmetic (the exactness argument is in ``steady.py``):

* every masked instruction whose mask (or, for a reduction, the ``reduce_mask`` over its input's axes) or regions
  depend on the loop variable is whole (its masks true everywhere, its regions inside their tensors, so the same
  instruction as unmasked) in the loop's first iterations, up to
  ``full_until`` (a ragged tail masked in the last iteration: the mask's constraints are affine, so each holds
  for a prefix of the loop's values, bounded with every other variable over its whole range); only that prefix
  may be advanced. (One whose mask fails at the start is not handled; one that depends on nothing is the same
  in every iteration);
* no on-chip access depends on the loop variable, except through the rotating copy of a tensor allocated in the
  loop or in a loop inside it (copy ``(weight * i + the rest) % buffers``, allocate.Placement): so ``period``
  iterations (the lcm of ``buffers / gcd(buffers, weight)``) touch the same SBUF/PSUM regions again;
* an HBM tensor the kernel writes is touched in the body either only at regions that do not depend on the loop
  variable, or only at regions that all move by the same step per iteration (the ``moving`` tensors: a store to
  the iteration's output tile). Their records are made by replaying just those accesses (``replay``), which the
  generated ``_replay<k>`` function lists with their instruction numbers;
* at least ``MIN_PERIODS`` periods: watching a loop costs a comparison of the scheduler's state per period, which
  pays only when at least half of the loop can be advanced (after a period of warm-up and two compared ones).

Kernel inputs nothing writes are untracked (reading them never waits) and need nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.nodes import Loop
from nki_dsl.ir.ops import OPS, reduce_mask_operand
from nki_dsl.ir.source_safe import py_int, py_var
from nki_dsl.passes.engines import engine_of

MIN_PERIODS = 6


@dataclass
class LoopFacts:
    loop: Loop
    line: int  # index of its ``for`` line in the generated source
    pad: str
    outer: tuple[str, ...]  # program ids and enclosing loop variables, outermost first
    per_iteration: int = 0  # instructions per iteration
    instructions: list = field(default_factory=list)  # (op, fused write, template) of the body, in order
    period: int = 1
    engines: frozenset = frozenset()  # compute engines the body uses
    dma: bool = False
    ports: frozenset = frozenset()
    dge: bool = False
    moving: frozenset = frozenset()  # region keys of the moving HBM tensors
    replay_lines: list = field(default_factory=list)
    full_until: float = math.inf  # the last value of the loop variable at which every masked instruction is whole


def _depends(a, var: str) -> bool:
    return any(v == var for e in a.index for v, _ in e.terms)


def _ranges(stream) -> dict:
    ranges = {v: (lp.start, lp.last) for v, lp in stream.addresses.loops.items()}
    ranges.update({f"pid{k}": (0, g - 1) for k, g in enumerate(stream.kernel.grid or ())})
    return ranges


def _holds_until(terms, const: int, var: str, ranges: dict, axes) -> float | None:
    """The last value of ``var`` at which ``sum(c * v) + const >= 0`` holds for every value of the other variables
    (access axes over ``axes``, loop variables and program ids over their ranges): inf if it always does, None if
    it holds only from some value on or for nothing (not a prefix)."""
    a, low = 0, const
    for v, c in terms:
        if v == var:
            a += c
            continue
        if var_kind(v) == "axis":
            k = int(v[1:])
            if k >= len(axes):
                return None
            r = (0, axes[k] - 1)
        else:
            r = ranges.get(v)
            if r is None:
                return None
        low += min(c * r[0], c * r[1])
    if a == 0:
        return math.inf if low >= 0 else None
    if a > 0:  # holds from -low / a on: a prefix only if that is no later than the loop's start
        return math.inf if low + a * ranges[var][0] >= 0 else None
    return low // -a  # a * v + low >= 0  <=>  v <= low / -a


def _whole_until(stream, op, write, t, var: str, ranges: dict) -> float | None:
    """The last value of ``var`` at which ``op`` is whole: its masks' constraints hold over the whole tile and its
    regions that move with ``var`` stay inside their tensors (``addresses`` clips a masked instruction's regions,
    so a clipped one does not move like the affine one ``_replay`` writes). None: not for a prefix of the loop."""
    until = math.inf
    shape = op.result.type.shape if op.result is not None else (t.writes[0].shape if t.writes else ())
    masks = [(m, shape) for m in (op.mask, write.mask if write is not None else None) if m is not None]
    reduce_mask = op.attrs.get("reduce_mask")
    if reduce_mask is not None:  # over the reduced input's axes: bounded over that operand's tile
        data = op.operands.get(reduce_mask_operand(OPS[op.name]))
        if data is None or not hasattr(data, "shape"):
            return None
        masks.append((reduce_mask, data.shape))
    for m, axes in masks:
        for c in m.constraints:
            if not any(v == var for v, _ in c.terms):
                continue
            got = _holds_until(c.terms, c.const, var, ranges, axes)
            if got is None:
                return None
            until = min(until, got)
    for a in (*t.reads, *t.writes):
        if not _depends(a, var):
            continue
        for d, e in enumerate(a.index):
            if e.coef(var) == 0:
                continue
            lo = _holds_until(e.terms, e.const, var, ranges, a.shape)  # index >= 0
            hi = _holds_until([(v, -c) for v, c in e.terms], a.tensor.type.shape[d] - 1 - e.const, var, ranges,
                              a.shape)  # index <= size - 1; fmt: skip
            if lo is None or hi is None:
                return None
            until = min(until, lo, hi)
    return until


def _analyse(stream, lf: LoopFacts) -> bool:
    var = lf.loop.var
    if lf.per_iteration <= 0:
        return False
    addresses, placements = stream.addresses, stream.addresses.allocation.placements
    period = 1
    steps: dict[int, set] = {}  # tracked HBM key -> per-iteration index steps of its accesses (None: fixed)
    engines, ports = set(), set()
    ranges = _ranges(stream)
    full_until = math.inf
    for op, write, t in lf.instructions:
        if is_clipped(op, write):
            until = _whole_until(stream, op, write, t, var, ranges)
            if until is None:
                return False  # a mask that may switch the instruction off or shrink it other than at the end
            full_until = min(full_until, until)
        if t.is_dma:
            lf.dma = True
            lf.dge = lf.dge or t.dge
        else:
            engines.add(t.engine)
        ports.update(t.ports)
        for a in (*t.reads, *t.writes):
            if a.tensor.type.buffer.on_chip:
                p = placements[a.tensor.name]
                # a block-local tensor's block index does not move its address (addresses.py)
                skip = a.tensor.type.par_axis if p.shared_blocks else 0
                if any(v == var for e in a.index[skip:] for v, _ in e.terms):
                    return False
                for v, weight in p.turns if p.buffers > 1 else ():
                    if v == var:  # one iteration moves the copy by ``weight``: the same copy again after this many
                        period = math.lcm(period, p.buffers // math.gcd(p.buffers, weight))
                continue
            key = addresses.key_of(a.tensor.name)
            if key not in stream.written_hbm:
                continue
            whole = addresses.roots[a.tensor.name] is not a.tensor  # a reshape view: the whole storage
            steps.setdefault(key, set()).add(None if whole or not _depends(a, var)
                                             else tuple(e.coef(var) for e in a.index))  # fmt: skip
    for s in steps.values():
        if len(s) > 1:  # fixed and moving regions of one tensor, or moving by different steps
            return False
    lp = lf.loop
    whole = range(lp.start, lp.stop if full_until == math.inf else min(lp.stop, int(full_until) + 1), lp.step)
    if len(whole) < MIN_PERIODS * period:
        return False
    lf.period, lf.engines, lf.ports, lf.full_until = period, frozenset(engines), frozenset(ports), full_until
    lf.moving = frozenset(k for k, s in steps.items() if s != {None})
    return True


def _count(body: list) -> int:
    n = 0
    for stmt in body:
        if isinstance(stmt, Loop):
            n += len(range(stmt.start, stmt.stop, stmt.step)) * _count(stmt.body)
        elif engine_of(stmt) is not None:
            n += 1
    return n


def is_clipped(op, write) -> bool:
    """Whether an instruction's regions are clipped to their tensors: masked ones may index past a tensor where
    the mask is off (a reduction's ``reduce_mask`` too)."""
    return op.mask is not None or "reduce_mask" in op.attrs or (write is not None and write.mask is not None)


def _replay(stream, k: int, lf: LoopFacts) -> list[str]:
    """``_replay<k>(_rp, _n, *outer, _lo, _hi)``: ``_rp(instruction number, reads, writes)`` for the moving-tensor
    accesses of iterations ``range(_lo, _hi, step)``; ``_n`` numbers the first instruction of ``_lo``."""
    addresses = stream.addresses
    templates = {id(op): t for op, _, t in lf.instructions}
    # masked instructions' regions are clipped to the tensor, as the stream writes them
    clipped = {id(op) for op, w, _ in lf.instructions if is_clipped(op, w)}

    def moving(a) -> bool:
        return not a.tensor.type.buffer.on_chip and addresses.key_of(a.tensor.name) in lf.moving

    def has_moving(body) -> bool:
        for stmt in body:
            if isinstance(stmt, Loop):
                if has_moving(stmt.body):
                    return True
            elif id(stmt) in templates and any(map(moving, (*templates[id(stmt)].reads, *templates[id(stmt)].writes))):
                return True
        return False

    outer = "".join(f"{py_var(v)}, " for v in lf.outer)
    lines = [f"def _replay{py_int(k)}(_rp, _n, {outer}_lo, _hi):"]

    def body(stmts, pad: str) -> None:
        pending = 0
        for stmt in stmts:
            if isinstance(stmt, Loop):
                if not has_moving(stmt.body):
                    pending += _count([stmt])
                    continue
                if pending:
                    lines.append(f"{pad}_n += {py_int(pending)}")
                    pending = 0
                bounds = ", ".join(py_int(b) for b in (stmt.start, stmt.stop, stmt.step))
                lines.append(f"{pad}for {py_var(stmt.var, 'loop')} in range({bounds}):")
                body(stmt.body, pad + "    ")
                continue
            t = templates.get(id(stmt))
            if t is None:
                continue
            reads, writes = [a for a in t.reads if moving(a)], [a for a in t.writes if moving(a)]
            if reads or writes:
                clip = id(stmt) in clipped
                r = "".join(addresses.source(a, clip) + ", " for a in reads)
                w = "".join(addresses.source(a, clip) + ", " for a in writes)
                lines.append(f"{pad}_rp(_n + {py_int(pending)}, ({r}), ({w}))")
            pending += 1
        lines.append(f"{pad}_n += {py_int(pending)}" if pending else f"{pad}pass")

    lp = lf.loop
    lines.append(f"    for {py_var(lp.var, 'loop')} in range(_lo, _hi, {py_int(lp.step)}):")
    body(lp.body, "        ")
    return lines


def _has_runtime_loop(loop) -> bool:
    """``loop`` is a runtime loop or holds one (an iteration's length is then known only from the run)."""
    return loop.runtime or any(isinstance(s, type(loop)) and _has_runtime_loop(s) for s in loop.body)


def eligible_loops(stream, loops: list[LoopFacts]) -> dict[int, LoopFacts]:
    """Loop number -> facts, for the loops ``steady.py`` may advance (their replay source in ``replay_lines``)."""
    out = {}
    for k, lf in enumerate(loops):
        if _has_runtime_loop(lf.loop):
            continue  # iterations differ by what the run read (ir/runtime_loops.py): scheduled one by one
        if _analyse(stream, lf):
            lf.replay_lines = _replay(stream, k, lf)
            out[k] = lf
    return out

