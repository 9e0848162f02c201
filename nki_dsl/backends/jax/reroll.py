"""Loop re-rolling: ``k >= MIN_TRIPS`` consecutive isomorphic op chains of a straight-line run lowered as one
``lax.fori_loop`` whose body is traced once.

Why: a kernel that unrolls its work in Python (``for t in range(n)`` over tiles) hands XLA one op per instruction,
and XLA's CPU compile time is mostly LLVM compiling each of the program's kernels (tens of milliseconds each):
it grows with the unrolled count. Traced once inside a loop, the work is one body: 32 unrolled tiles' first call
1.0 s -> 0.23 s (``benchmarks/jax_speed.py --reroll``). It does not help a software-pipelined kernel with few
units and many live ring buffers, such as the ViT attention kernel (see ``MIN_TRIPS``): its cost is the separate
kernels of each head's chain, which only batching the heads into one op per stage would remove.

Chains ("units") are ``L`` consecutive ops, repeated ``k`` times; unit ``j`` is isomorphic to unit 0 when op by op
they have the same name, attributes, immediates, result type, operand shapes and index/mask structure (every
coefficient of every variable), and differ at most in the integer constants of their indices and masks; tensors
defined outside the run are the same tensors, and a tile or buffer a unit defines is used only inside that unit,
at the same places. The template is unit 0 with each constant that varies across units replaced by a fresh index
variable, bound in iteration ``j`` to its value in unit ``j`` by a constant table (``table[j]``): offsets need not
be affine in ``j``, so ring-buffer slots such as ``n % 3`` re-roll as well as block offsets.

The loop runs the units in program order and carries every tensor they write that exists before the run, so
dependences between units (a unit reading what the previous one wrote) are kept exactly; results are those of the
unrolled ops (the same ops, in the same order, on the same values). What changes is how XLA sees the accesses
whose constants vary: windows at traced starts (``dynamic_slice`` / ``dynamic_update_slice``), not static ones.

Finding runs: a cheap signature per op (everything but tensor identity and constants) gives, for each period
``L``, the stretches where op ``i`` and op ``i + L`` look alike; the candidates that save the most ops are then
checked exactly (``_match``), and the first that passes is taken; the ops before and after it are searched again.
Ops with an order-sensitive side channel (random numbers, printing, the cores' sync ops), HBM view ops and loops
end a run. Only runs of ``MIN_TRIPS`` units or more are re-rolled (see there: below it the loop costs more than it
saves).
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, replace

import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl.backends.jax.analysis import RANDOM_OPS
from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.cores import SYNC_OPS
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.nodes import Access, Imm, Loop, Op
from nki_dsl.ir.ops import OPS

# Switches, read at each lowering: the environment variables NKI_JAX_REROLL=0 (off) and NKI_JAX_REROLL_MIN_TRIPS
# (benchmarks/jax_speed.py --reroll sets both), or these module values (tests).
ENABLED = True
# Re-roll only runs of at least MIN_TRIPS units. ``python benchmarks/jax_speed.py --reroll 4,8,16,32 --cpu`` (a
# Python loop of n 128x512 tiles: load, exp into ring slot t % 3, row sum, divide, store), re-rolled / unrolled,
# load ~8: first call n=4 0.86-1.07 (two runs), n=8 0.50-0.56, n=16 0.40-0.48, n=32 0.22-0.23; steady state
# 0.98-1.18 (a loop of small windows at traced starts runs up to ~15% slower than straight-line code XLA fuses).
# The ViT attention kernel's pipelined heads (5 units of 40 ops over 8 live buffers) lose both ways re-rolled
# (NKI_JAX_REROLL_MIN_TRIPS=2, CPU time, load ~8): 6 heads first call 2.0 -> 2.2 s, run 3.5 -> 7.3 ms; 12 heads
# (inside the vectorised head-group loop) 2.5 -> 3.0 s, 8.3 -> 20.4 ms.
MIN_TRIPS = 8
MIN_SAVED = 8  # nor when it removes fewer ops than this from the program ((k - 1) * L)
MAX_PERIOD = 300  # longest unit searched for (the search compares every op with the op MAX_PERIOD ahead at most)
MAX_CANDIDATES = 40  # exact checks tried per run before giving up (bounds lowering time on long bodies)
TABLE_BASE = 1_000_000  # table variables are loop-index names i<TABLE_BASE + n>: no traced kernel has that many


@dataclass(frozen=True)
class Rerolled:
    """``trips`` units lowered as one loop over ``body`` (the template ops); ``tables[var]`` is the value of index
    variable ``var`` in each iteration."""

    body: tuple
    trips: int
    tables: tuple  # ((var, (value per iteration, ...)), ...)


def _excluded(stmt) -> bool:
    if isinstance(stmt, Loop) or stmt.name in VIEW_OPS or stmt.name in RANDOM_OPS or stmt.name in SYNC_OPS:
        return True
    spec = OPS.get(stmt.name)
    return spec is None or spec.family == "print"


def _signature(op: Op):
    """What must match between op ``i`` of unit 0 and of unit ``j`` besides tensor identity and constants."""
    operands = []
    for name in sorted(op.operands):
        v = op.operands[name]
        if isinstance(v, Imm):
            operands.append((name, "imm", type(v.value).__name__, v.value))
        else:
            t = v.tensor.type
            operands.append((name, tuple(v.shape), tuple(t.shape), t.dtype, t.buffer,
                             tuple(e.terms for e in v.index)))  # fmt: skip
    result = None if op.result is None else (op.result.type.shape, op.result.type.dtype, op.result.type.buffer,
                                             op.result.type.par_axis)  # fmt: skip
    mask = None if op.mask is None else tuple(c.terms for c in op.mask.constraints)
    return (op.name, repr(sorted(op.attrs.items(), key=lambda kv: kv[0])), result, mask, tuple(operands))


def _constants(op: Op) -> list[int]:
    """The op's integer constants a template may take from a table, in a fixed order."""
    out = []
    for name in sorted(op.operands):
        v = op.operands[name]
        if isinstance(v, Access):
            out.extend(e.const for e in v.index)
    if op.mask is not None:
        out.extend(c.const for c in op.mask.constraints)
    return out


def _defined(op: Op):
    return op.result.name if op.result is not None else None


def _match(ops, sigs, s: int, L: int, k: int, uses: dict) -> bool:
    """Are units ``ops[s + j*L : s + (j+1)*L]``, j < k, isomorphic to unit 0 (see the module docstring)?"""
    run = ops[s:s + L * k]
    in_run = {}  # tensor name -> (unit, position) of the op defining it
    for n, op in enumerate(run):
        d = _defined(op)
        if d is not None:
            in_run[d] = divmod(n, L)
    for name, (unit, _) in in_run.items():
        # a tensor a unit defines is used by that unit only (and is no kernel output): the loop keeps it local
        if uses["outside"].get(name, 0) or any(u != unit for u in uses["units"](name, s, L, k)):
            return False
    for j in range(1, k):
        for p in range(L):
            a, b = run[p], run[j * L + p]
            if sigs[s + p] != sigs[s + j * L + p]:
                return False
            for name in a.operands:
                va, vb = a.operands[name], b.operands[name]
                if isinstance(va, Imm):
                    continue
                ta, tb = va.tensor.name, vb.tensor.name
                ia, ib = in_run.get(ta), in_run.get(tb)
                if ia is None and ib is None:
                    if ta != tb:
                        return False
                elif ia is None or ib is None or ia[1] != ib[1] or ib[0] != j:
                    return False
    return True


def _uses(ops, body_refs: dict):
    """Where tensors are named: the positions in this straight-line list of the ops naming each, and how many
    references the kernel has elsewhere."""
    at: dict[str, list[int]] = {}
    for n, op in enumerate(ops):
        for r in {v.tensor.name for v in op.operands.values() if isinstance(v, Access)}:
            at.setdefault(r, []).append(n)
    outside = {name: c - len(at.get(name, ())) for name, c in body_refs.items()}

    def units(name, s, L, k):
        return [(n - s) // L if s <= n < s + L * k else -1 for n in at.get(name, ())]

    return {"outside": outside, "units": units}


def _enabled() -> bool:
    return ENABLED and os.environ.get("NKI_JAX_REROLL", "1") != "0"


def _min_trips() -> int:
    return max(2, int(os.environ.get("NKI_JAX_REROLL_MIN_TRIPS", MIN_TRIPS)))


def _candidates(sigs):
    """(saved ops, start, period, units) of the periodic stretches of ``sigs`` (one int per op)."""
    n = len(sigs)
    arr = np.asarray(sigs, dtype=np.int64)
    found = []
    for L in range(1, min(n // 2, MAX_PERIOD) + 1):
        eq = np.concatenate(([False], arr[:-L] == arr[L:], [False]))
        edges = np.flatnonzero(np.diff(eq.astype(np.int8)))
        # stretches [i, j) of positions equal to their successor at distance L: units start at i, i+L, ... up to j
        for i, j in zip(edges[0::2].tolist(), edges[1::2].tolist()):
            for phase in range(min(L, j - i)):
                k = (j - i - phase) // L + 1
                if k >= _min_trips() and (k - 1) * L >= MIN_SAVED:
                    found.append(((k - 1) * L, i + phase, L, k))
    return found


def _template(units: list[list[Op]], fresh):
    """Unit 0 with every constant that differs between units replaced by a table variable, and the tables."""
    L = len(units[0])
    consts = [[_constants(u[p]) for u in units] for p in range(L)]
    columns: dict[tuple, str] = {}  # a column of values (per unit) -> its variable: equal columns share one
    body = []
    for p in range(L):
        op = units[0][p]
        per_unit = consts[p]
        names = []
        for c in range(len(per_unit[0])):
            col = tuple(v[c] for v in per_unit)
            if len(set(col)) == 1:
                names.append(None)
                continue
            if col not in columns:
                columns[col] = fresh()
            names.append(columns[col])
        body.append(_substitute(op, names) if any(names) else op)
    tables = tuple((var, col) for col, var in columns.items())
    return tuple(body), tables


def _with_var(e: Affine, var):
    return e if var is None else Affine(e.terms, 0) + Affine.var(var)


def _substitute(op: Op, names: list) -> Op:
    it = iter(names)
    operands = {}
    for name in sorted(op.operands):
        v = op.operands[name]
        if isinstance(v, Access):
            v = Access(v.tensor, tuple(_with_var(e, next(it)) for e in v.index), v.shape)
        operands[name] = v
    mask = op.mask
    if mask is not None:
        mask = Mask(tuple(_with_var(c, next(it)) for c in mask.constraints))
    return replace(op, operands={n: operands[n] for n in op.operands}, mask=mask)


def plan(body: list, info, refs: dict) -> list:
    """``body`` with its re-rollable runs replaced by ``Rerolled`` items (``refs``: every tensor name's reference
    count in the kernel). Table variables are registered in ``info.ranges``."""
    if not _enabled():
        return list(body)
    out: list = []
    run: list[Op] = []
    for stmt in body:
        if _excluded(stmt):
            out += _reroll_run(run, info, refs)
            out.append(stmt)
            run = []
        else:
            run.append(stmt)
    out += _reroll_run(run, info, refs)
    return out


def _reroll_run(ops: list[Op], info, refs: dict) -> list:
    if len(ops) < 2:
        return list(ops)
    sigs = [_signature(op) for op in ops]
    uses = _uses(ops, refs)
    heap = [(-saved, L, s, k) for saved, s, L, k in _candidates([hash(g) for g in sigs])]
    heapq.heapify(heap)
    seen, tried = set(), 0
    while heap and tried < MAX_CANDIDATES:
        _, L, s, k = heapq.heappop(heap)
        if (s, L, k) in seen:
            continue
        seen.add((s, L, k))
        tried += 1
        if not _match(ops, sigs, s, L, k, uses):
            # a unit at either end may be the odd one out (a tile the first unit shares with the rest, a last
            # unit that differs): try the run without it
            if k - 1 >= _min_trips() and (k - 2) * L >= MIN_SAVED:
                heapq.heappush(heap, (-(k - 2) * L, L, s + L, k - 1))
                heapq.heappush(heap, (-(k - 2) * L, L, s, k - 1))
            continue
        units = [ops[s + j * L:s + (j + 1) * L] for j in range(k)]

        def fresh():
            var = f"i{TABLE_BASE + len(info.ranges)}"
            while var in info.ranges:
                var = f"i{int(var[1:]) + 1}"
            info.ranges[var] = (0, 0)  # reserved; set below
            return var

        body, tables = _template(units, fresh)
        for var, col in tables:
            info.ranges[var] = (min(col), max(col))
        return (_reroll_run(ops[:s], info, refs) + [Rerolled(body, k, tables)]
                + _reroll_run(ops[s + L * k:], info, refs))  # fmt: skip
    return list(ops)


def run(item: Rerolled, st, run_op, written_by) -> None:
    """The units as one ``lax.fori_loop``: tensors they write that exist before the run are carried."""
    local = {op.result.name for op in item.body if op.result is not None}
    written = set()
    for op in item.body:
        written |= written_by(op)
    carried = sorted((n for n in written if n not in local), key=repr)
    init = tuple(st.value(n) if n in st.env else st.fresh(n) for n in carried)
    tables = [(var, jnp.asarray(np.asarray(col, np.int32))) for var, col in item.tables]

    def step(i, carry):
        inner = st.child()
        inner.env.update(zip(carried, carry))
        for var, table in tables:
            inner.ivars[var] = table[i]
        inner.tables.update(item.tables)
        for op in item.body:
            run_op(op, inner)
        return tuple(inner.value(n) for n in carried)

    out = lax.fori_loop(0, item.trips, step, init)
    st.env.update(zip(carried, out))
