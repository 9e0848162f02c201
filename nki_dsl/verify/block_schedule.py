"""When each block of a block tensor holds data someone still needs: its accesses replayed in program order.

The ``direct-allocation`` rule asks whether two blocks placed in the same space (``ncc.sbuf.mod_alloc(...,
num_free_tiles=(2,))``) are ever needed at once. Replaying the tensor's accesses in the order the program runs
them (loops iterated, program ids enumerated) answers it exactly, whatever mix of indices the accesses use: a
software pipeline's prologue ``buf[0] = ...`` before the loop that reads ``buf[i]`` and refills ``buf[i + 1]``, an
epilogue after it, blocks filled in one loop and read in another.

A block's **segment** runs from a write that starts new contents (the first access, or a write after a read) to
the last access before the next such write: the data is needed over it. Writes with no read between them extend
one segment (a block written in two halves is one value), and an accumulation (``+=``) reads. Two blocks in the
same space conflict when their segments overlap: one is (re)written while the other's contents are still to be
read. One op reading a block and writing another in the same space does not conflict (it reads before it
writes).

The replay visits only the loops that hold an access to the tensor and is bounded (``MAX_EVENTS`` block
accesses): past it, or for index forms it cannot evaluate (shape-family symbols), it returns False and the rule
falls back to its per-iteration window check. So it does over loops whose trip count a shape family's symbols set
(``SYMBOLIC_LOOPS``, set by verify/family.py while it checks the family's lowest instance): the replay's verdict
depends on trip counts, the window check's does not, so the family's proof uses the latter (the same in every
instance) and each instance is replayed when it is instantiated and verified.
"""

from __future__ import annotations

import itertools
from contextvars import ContextVar
from dataclasses import dataclass

from nki_dsl.ir.affine import var_kind
from nki_dsl.ir.nodes import Access, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS
from nki_dsl.verify.program import Program, Use

MAX_EVENTS = 200_000  # block accesses replayed per tensor at most: the rule's cost for large parsed IR
# Variables of the loops whose stop is a shape-family symbol (see the module docstring).
SYMBOLIC_LOOPS: ContextVar[frozenset[str]] = ContextVar("nki_symbolic_loops", default=frozenset())


@dataclass(frozen=True)
class Segment:
    """Block ``block`` holds contents needed from step ``start`` to step ``end``; ``first`` and ``last`` are the
    uses at those steps (their ops' lines go into the diagnostic); ``filled`` tells whether ``first`` writes it."""

    block: tuple[int, ...]
    start: int
    end: int
    first: Use
    last: Use
    filled: bool


@dataclass(frozen=True)
class Conflict:
    """``later`` starts (is written) while ``earlier``, another block in the same space, is still needed."""

    earlier: Segment
    later: Segment


def first_conflict(prog: Program, t: Tensor, space_of: dict[tuple[int, ...], tuple]) -> Conflict | None | bool:
    """The first two overlapping segments of blocks with the same ``space_of`` key; None when there are none;
    False when the replay is out of reach (see the module docstring)."""
    segments = _segments(prog, t)
    if segments is False:
        return False
    by_space: dict[tuple, list[Segment]] = {}
    for s in segments:
        if s.block in space_of:
            by_space.setdefault(space_of[s.block], []).append(s)
    found = []
    for group in by_space.values():
        group.sort(key=lambda s: (s.start, s.end))
        holder = None  # the segment reaching furthest among those started so far
        for s in group:
            if holder is not None and holder.block != s.block and s.start < holder.end:
                found.append(Conflict(holder, s))
                break
            if holder is None or s.end > holder.end:
                holder = s
    return min(found, key=lambda c: c.later.start) if found else None


def _segments(prog: Program, t: Tensor) -> list[Segment] | bool:
    nb = len(t.type.block_shape)
    uses = list(prog.uses.get(t, []))
    if not uses:
        return []
    by_op: dict[int, list[Use]] = {}
    for u in uses:
        by_op.setdefault(id(u.site.op), []).append(u)
    relevant = {lp for u in uses for lp in u.site.loops}
    grid = tuple(prog.kernel.grid or (1,))
    if not _in_reach(uses, grid, t, nb):
        return False
    open_: dict[tuple[int, ...], list] = {}  # block -> [start, end, first use, last use, read since, filled]
    out: list[Segment] = []
    step = 0
    for pids in itertools.product(*(range(g) for g in grid)):
        env = {f"pid{k}": v for k, v in enumerate(pids)}
        for op, env_ in _replay(prog.kernel.body, env, relevant, by_op):
            for u in by_op[id(op)]:
                reads, writes = _roles(op, u)
                for block in _blocks(u.access, env_, t.type.block_shape, nb):
                    seg = open_.get(block)
                    if seg is not None and writes and not reads and seg[4]:  # new contents: the old are done
                        out.append(Segment(block, *seg[:4], seg[5]))
                        seg = None
                    if seg is None:
                        seg = open_[block] = [step, step, u, u, False, writes]
                    seg[1], seg[3] = step, u
                    seg[4] = seg[4] or reads
            step += 1
        for block, seg in open_.items():  # a new program instance: its own contents
            out.append(Segment(block, *seg[:4], seg[5]))
        open_.clear()
    return out


def _in_reach(uses: list[Use], grid: tuple[int, ...], t: Tensor, nb: int) -> bool:
    events = 0
    instances = 1
    for g in grid:
        instances *= g
    symbolic = SYMBOLIC_LOOPS.get()
    for u in uses:
        n = instances
        for lp in u.site.loops:
            if lp.var in symbolic or not isinstance(lp.stop, int):
                return False
            n *= lp.trip_count
        for e in u.access.index[:nb]:  # (an access without an index touches every block: counted below)
            if any(var_kind(v) == "sym" for v in e.vars()):
                return False
            for v, _ in e.terms:
                if var_kind(v) == "axis":
                    n *= u.access.shape[int(v[1:])]
        if len(u.access.index) < nb:
            for b in t.type.block_shape[len(u.access.index):]:
                n *= b
        events += n
        if events > MAX_EVENTS:
            return False
    return True


def _replay(body, env: dict, relevant: set, by_op: dict):
    """(op, loop values) for the ops touching the tensor, in the order the program runs them."""
    for stmt in body:
        if isinstance(stmt, Loop):
            if stmt not in relevant:
                continue
            for k in range(stmt.trip_count):
                env[stmt.var] = stmt.start + k * stmt.step
                yield from _replay(stmt.body, env, relevant, by_op)
            env.pop(stmt.var, None)
        elif isinstance(stmt, Op) and id(stmt) in by_op:
            yield stmt, env


def _roles(op: Op, u: Use) -> tuple[bool, bool]:
    """(reads, writes) of operand ``u``: an accumulation reads the contents it adds to."""
    spec = OPS[op.name]
    role = spec.operand(u.name).role
    accumulates = any(a.name == "accumulate" for a in spec.attrs) and op.attrs.get("accumulate") not in (
        "none", False)  # fmt: skip
    return role.reads or (role.writes and accumulates), role.writes


def _blocks(a: Access, env: dict, block_shape: tuple[int, ...], nb: int):
    """The block indices access ``a`` touches with loop and program-id values ``env`` (in range only)."""
    per_dim = []
    for k in range(nb):
        if k >= len(a.index):  # the whole tensor: every block
            per_dim.append(range(block_shape[k]))
            continue
        e = a.index[k]
        base = e.const
        spans = [0]
        for v, c in e.terms:
            if var_kind(v) == "axis":
                spans = [s + c * j for s in spans for j in range(a.shape[int(v[1:])])]
            else:
                base += c * env.get(v, 0)
        per_dim.append(sorted({base + s for s in spans if 0 <= base + s < block_shape[k]}))
    return itertools.product(*per_dim)
