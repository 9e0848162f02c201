"""Batching isomorphic, mutually independent ops of a straight-line run into one op per stage over a stacked
leading lane axis (``batch_plan`` says what and why); this module plans runs of a body and lowers them.

A group of ``K`` lanes lowers as ``jax.vmap`` (over the lanes) of its first op's ordinary lowering, whose operand
reads return the lane's stacked operand and whose writes are recorded instead of applied (``_LaneState``): the
same handler code as the unbatched lowering, so each lane computes what the op alone would. The program computes
every element with the same primitives on the same values as the unbatched one (the plan gives each read exactly
the elements program order would), rounded the same way. Compiled, the two agree bit for bit except where XLA on
CPU hands a dot or reduction to a YNNPACK kernel chosen by shape, whose summation order differs between a
[lanes, 128, 197] and a [128, 197] operand (an ulp; with ``xla_cpu_experimental_ynn_fusion_type=""`` they agree,
tests/backends/jax/test_batching.py). Re-rolled runs (``reroll``) are left to re-rolling.
A group of full tiles and the group of their ragged twins run as one op over their rows laid end to end
(``stitch``); an accumulation over split contraction tiles runs as one matmul over the joined tiles
(``contract``).

Switches, read at each lowering: ``NKI_JAX_BATCH=0`` (off), or ``ENABLED`` (tests).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import batch_plan as bp
from nki_dsl.backends.jax import contract, runtime, stitch, stitch_lower
from nki_dsl.backends.jax.context import OpContext, State
from nki_dsl.backends.jax.reroll import _excluded, _signature
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.nodes import Access, Loop, Op
from nki_dsl.ir.ops import OPS

ENABLED = True
_SKIP = set(os.environ.get("NKI_JAX_BATCH_SKIP", "").split(","))  # (debugging) op names never batched
STATS: list = []  # (ops in the run, groups, planning seconds) of each batched run planned (benchmarks, tests)


class _NotBatchableError(Exception):
    """An op whose lowering does something a lane cannot record (a mask computed from traced values)."""


@dataclass(frozen=True)
class Batched:
    """A planned region of a body, lowered by ``run``."""

    region: bp.Region


def enabled() -> bool:
    return ENABLED and os.environ.get("NKI_JAX_BATCH", "1") != "0"


class _LaneState(State):
    """The state one lane's op lowers against: reads of the op's operands return the given values, writes and
    results are recorded (operand name or RESULT -> value, mask)."""

    def __init__(self, st: State, inst: bp.Inst, values: dict):
        super().__init__(st.info, st.env, dict(st.ivars), st.offsets, st.plans, st.local_shapes, st.zero_poison,
                         st.views, st.tables)  # fmt: skip
        op = inst.op
        self._op, self._values = op, values
        self._by_id = {id(v): n for n, v in op.operands.items() if isinstance(v, Access)}
        self._by_id.update((id(v), n) for n, v in inst.reads.items())  # (reads cut to the op's box)
        self.read_names: list = []
        self.written: list = []  # (name, value, mask)

    def _name(self, access: Access) -> str:
        name = self._by_id.get(id(access))
        if name is None:
            raise _NotBatchableError("a lowering reads an access that is not its op's operand")
        return name

    def read(self, access: Access):
        name = self._name(access)
        if name not in self.read_names:
            self.read_names.append(name)
        if name not in self._values:
            raise _NotBatchableError(f"operand {name} is read but was not loaded")
        return self._values[name]

    def write(self, access: Access, value, mask=None) -> None:
        name = self._name(access)
        if mask is not None:
            if not isinstance(mask, (np.ndarray, np.bool_, bool)):
                raise _NotBatchableError("a write mask is not known at trace time")
            mask = np.broadcast_to(np.asarray(mask), tuple(access.shape))
            if mask.all():
                mask = None
        # held as the unbatched state holds the tensor (an on-chip float tile as fp32 values already rounded to its
        # dtype): a later group of the run reads this value as its operand, and a handler computing on a bf16 array
        # would round in bf16 (a Python-number scale to bf16 first) where the engine computes in fp32
        dtype = runtime.held_dtype(self.info.types[self.info.root(access.tensor.name)])
        value = jnp.broadcast_to(jnp.asarray(value).astype(dtype), tuple(access.shape))
        self.written.append((name, value, mask))

    def array(self, name: str):
        raise _NotBatchableError(f"a lowering reads tensor {name} whole")  # (it could see a pre-run value)

    def value(self, root: str):
        raise _NotBatchableError(f"a lowering reads tensor {root} whole")

    def set_array(self, name: str, value) -> None:
        if self._op.result is None or name != self._op.result.name:
            raise _NotBatchableError("a lowering sets a tensor other than its result")
        self.written.append((bp.RESULT, value, None))


def _predict(op: Op, ctx: OpContext) -> bp.Probe:
    """What ``op``'s lowering reads and writes, from its spec: the operands it reads (an accumulating write reads
    its destination), its result and written operands, each written where the op's mask holds. ``_run_group``
    checks every lowering against this and the run falls back to the unbatched ops if one differs."""
    spec = OPS[op.name]
    reads, writes = [], []
    accumulates = op.attrs.get("accumulate", "none") != "none" or op.attrs.get("dst_rmw_op", "none") != "none"
    for o in spec.operands:
        v = op.operands.get(o.name)
        if not isinstance(v, Access):
            continue
        if o.role.reads or accumulates:
            reads.append(o.name)
    if op.result is not None:
        writes.append((bp.RESULT, None))
    for o in spec.writes:
        v = op.operands.get(o.name)
        if isinstance(v, Access):
            mask = ctx.operand_mask(v)
            if mask is not None and not isinstance(mask, np.ndarray):
                raise _NotBatchableError("a write mask is not known at trace time")
            writes.append((o.name, None if mask is None or mask.all() else mask))
    return bp.Probe(tuple(reads), tuple(writes))


def _mask_key(ctx: OpContext):
    """What an op's mask selects, for grouping: None when it holds everywhere, else the elements it keeps (masks
    whose constants differ but select the same elements, ``t * 128 + p < rows`` on full tiles, are one key)."""
    if ctx.full_mask is None:
        return None
    m = ctx.full_mask.full()
    if isinstance(m, np.ndarray):
        return (m.shape, np.packbits(m).tobytes())
    return tuple((c.terms, c.const) for c in ctx.op.mask.constraints)


def _matches(probe: bp.Probe, written: list) -> bool:
    """Did a lowering write what ``_predict`` said (the same outputs, the same masks)?"""
    got = {name: mask for name, _, mask in written}
    if len(got) != len(written) or set(got) != {n for n, _ in probe.writes}:
        return False
    for name, mask in probe.writes:
        m = got[name]
        if (m is None) != (mask is None) or (m is not None and not np.array_equal(m, mask)):
            return False
    return True


def _eligible(op, st: State) -> bool:
    if isinstance(op, Op) and (op.name in _SKIP or ("acc" in _SKIP and op.attrs.get("accumulate", "none") != "none")):
        return False
    if isinstance(op, Loop) or _excluded(op) or hbm_operand(op) is not None:
        return False
    for v in op.operands.values():
        if isinstance(v, Access):
            name = v.tensor.name
            if st.info.root(name) != name or name in st.offsets:
                return False
    return op.result is None or st.info.root(op.result.name) == op.result.name


def _held_shape(st: State, root: str) -> tuple:
    view = st.views.get(root)
    if view is not None:
        return tuple(view.shape)
    shape = st.local_shapes.get(root)
    return tuple(shape) if shape is not None else tuple(st.info.types[root].shape)


def plan(body: list, st: State) -> list:
    """``body`` (statements and re-rolled runs) with the runs worth batching replaced by ``Batched`` items."""
    if not enabled():
        return list(body)
    out, run, defined = [], [], set()
    for stmt in body:
        if isinstance(stmt, Op) and _eligible(stmt, st):
            run.append(stmt)
            continue
        out += _plan_run(run, st, defined)
        defined |= {op.result.name for op in run if op.result is not None}
        run = []
        out.append(stmt)
        if isinstance(stmt, Op) and stmt.result is not None:
            defined.add(stmt.result.name)
    out += _plan_run(run, st, defined)
    return out


def _plan_run(ops: list, st: State, defined_before: set) -> list:
    if len(ops) <= bp.MIN_SAVED:
        return list(ops)
    t0 = time.perf_counter()
    try:
        region = _plan_region(ops, st, defined_before)
    except _NotBatchableError:
        region = None
    if region is None:
        return list(ops)
    region.stats["plan_s"] = time.perf_counter() - t0
    STATS.append((len(ops), len(region.groups), region.stats["plan_s"]))
    return [Batched(region)]


def _plan_region(ops: list, st: State, defined_before: set):
    info = st.info
    ctxs = {id(op): OpContext(st, op) for op in ops}  # (one per op: its mask, box and cut reads)
    keys = [bp.op_key(op, _signature, lambda o: _mask_key(ctxs[id(o)])) for op in ops]
    if len(ops) - len(set(keys)) < bp.MIN_SAVED:  # not enough isomorphic ops to save anything
        return None
    elements = sum(math.prod(v.shape) for op in ops for v in op.operands.values() if isinstance(v, Access))
    if elements > bp.MAX_ELEMENTS:  # (the plan's NumPy work and memory grow with the elements the run touches)
        return None
    probes = {}
    insts = []
    for n, (op, key) in enumerate(zip(ops, keys)):
        if key not in probes:
            probes[key] = _predict(op, ctxs[id(op)])
        inst = bp.Inst(op, n, key, probes[key])
        ctx = ctxs[id(op)]
        if ctx.box:  # the lowering reads its operands cut to the box: the plan tracks those reads
            inst.reads = {name: ctx.access(name) for name in inst.probe.reads}
        insts.append(inst)
    written = set()
    for inst in insts:
        for name, _ in inst.probe.writes:
            t = inst.op.result.name if name == bp.RESULT else inst.op.operands[name].tensor.name
            written.add(info.root(t))
    static = {k: v for k, v in st.ivars.items() if isinstance(v, int)}
    final = bp.analyse(insts, written, lambda r: _held_shape(st, r), st.index, info.root, static)
    if final is None:
        return None
    groups = bp.form_groups(insts)
    if len(insts) - len(groups) < bp.MIN_SAVED:
        return None

    def flat_of(v):
        root = info.root(v.tensor.name)
        got = bp.flat_indices(st.index(v), tuple(v.shape), _held_shape(st, root), static)
        return None if got is None or got[1] is not None else got[0]

    stitched = stitch.pair_groups(groups, insts, lambda inst: ctxs[id(inst.op)],
                                  lambda t: info.types[info.root(t)].dtype, flat_of)  # fmt: skip
    bp.classify_reads(groups, insts, stitch.direct_reads(stitched))
    region_refs: dict = {}
    for op in ops:
        for name in {v.tensor.name for v in op.operands.values() if isinstance(v, Access)}:
            region_refs[name] = region_refs.get(name, 0) + 1
    local = defined_before | {op.result.name for op in ops if op.result is not None}
    ends = info.outputs | {p.name for p in info.kernel.params}

    def live(root):
        # dead after the run: made in this body (afresh each time it runs) and named by no op outside the run
        return root in ends or root not in local or info.refs.get(root, 0) != region_refs.get(root, 0)

    region = bp.Region(insts, groups, bp.writeback(final, live))
    region.stitched = stitched
    region.joins = contract.plan(groups, stitched, lambda t: info.types[info.root(t)].dtype)
    return region


# -- lowering ---------------------------------------------------------------------------------------------------


def _out_access(inst: bp.Inst, k: int):
    name = inst.probe.writes[k][0]
    return name, (None if name == bp.RESULT else inst.op.operands[name]), inst.probe.writes[k][1]


def _apply(target: State, inst: bp.Inst, k: int, value) -> None:
    """Apply output ``k`` of ``inst`` (one lane's value) to ``target`` as the unbatched op would have."""
    name, access, mask = _out_access(inst, k)
    if access is None:
        target.set_array(inst.op.result.name, value)
        return
    root = target.info.root(access.tensor.name)
    if root not in target.env:  # made inside the run, every element read is written by the sources
        target.env[root] = target.fresh(root)
    target.write(access, value, mask)


def _same_access(a: Access, b: Access) -> bool:
    return a.tensor.name == b.tensor.name and a.index == b.index and tuple(a.shape) == tuple(b.shape)


def _pre(st: State, g: bp.Group, name: str):
    """Operand ``name`` of every lane read from the state as it was before the run: ``(value, batched?)``."""
    return _read_lanes(st, [inst.read_access(name) for inst in g.insts], g.lane_access, name)


def _read_lanes(st: State, accesses: list, memo: dict, key):
    """Each lane's access read from the state: ``(value, batched?)`` (``memo[key]``: their lane access)."""
    if all(_same_access(accesses[0], a) for a in accesses):
        return st.read(accesses[0]), False
    lane_access = memo.get(key)
    if lane_access is None:
        lane_access = memo[key] = bp.lane_access(accesses) or False
    if lane_access:
        return st.read(lane_access), True
    return jnp.stack([st.read(a) for a in accesses]), True


def _part(st: State, g: bp.Group, name: str, part: bp.Part, outs: dict):
    if part.kind == "pre":
        value, batched = _pre(st, g, name)
        return value if batched else jnp.broadcast_to(value, (len(g.insts), *value.shape))
    out = outs[part.group][part.k]
    shape = tuple(g.insts[0].read_access(name).shape)
    if part.kind == "gather":
        return out.reshape(-1)[jnp.asarray(part.index.astype(np.int32))]
    if part.kind == "pieces":
        return jnp.stack([_assemble(out, pieces, shape) for pieces in part.pieces])
    full = (len(g.insts), *shape)
    if not part.box:
        return _read_affine(out, part.maps, full)
    lo, sizes = part.box
    value = _read_affine(out, part.maps, sizes)
    return lax.pad(value, jnp.zeros((), value.dtype), [(a, m - a - n, 0) for a, n, m in zip(lo, sizes, full)])


def _read_affine(array, maps, shape):
    """Elements ``array[(x @ A + b)]`` for every position ``x`` of ``shape`` (``batch_plan.affine_plan``)."""
    return acc.read(array, bp.affine_plan(maps, shape, array.shape), {})


def _assemble(out, pieces, shape):
    """One lane's operand from boxes of producer lanes (``batch_plan._pieces``), each padded into place."""
    value = None
    for p, lo, sizes, maps in pieces:
        box = _read_affine(out[p], maps, sizes)
        pads = [(a, m - a - n, 0) for a, n, m in zip(lo, sizes, shape)]
        placed = lax.pad(box, jnp.zeros((), box.dtype), pads)
        if value is None:
            value = placed
            continue
        inside = np.zeros(shape, bool)
        inside[tuple(slice(a, a + n) for a, n in zip(lo, sizes))] = True
        value = jnp.where(_mask_expr(inside), placed, value)
    return jnp.zeros(shape, out.dtype) if value is None else value  # (a lane this source gives nothing)


def _mask_expr(mask: np.ndarray):
    """A static boolean mask as XLA should see it: a product of per-axis ranges (``iota`` comparisons) when it is
    one, which XLA computes in the loop, else the constant. (A [6, 128, 197] boolean constant in a fusion cost
    LLVM up to seconds to compile, measured on the ViT attention kernel's ragged tiles.)"""
    factors = [mask.any(axis=tuple(k for k in range(mask.ndim) if k != a)) for a in range(mask.ndim)]
    rebuilt = np.ones((1,) * mask.ndim, bool)
    for a, f in enumerate(factors):
        rebuilt = rebuilt & f.reshape([-1 if k == a else 1 for k in range(mask.ndim)])
    if not np.array_equal(np.broadcast_to(rebuilt, mask.shape), mask):
        return mask
    expr = None
    for a, f in enumerate(factors):
        if f.all():
            continue
        hit = np.flatnonzero(f)
        view = [f.size if k == a else 1 for k in range(mask.ndim)]
        if hit.size and hit[-1] - hit[0] + 1 == hit.size:  # one range: two comparisons of an iota
            i = lax.broadcasted_iota(jnp.int32, tuple(view), a)
            term = (i >= int(hit[0])) & (i <= int(hit[-1]))
        else:
            term = f.reshape(view)
        expr = term if expr is None else expr & term
    return np.ones(mask.shape, bool) if expr is None else jnp.broadcast_to(expr, mask.shape)


def _inputs(st: State, g: bp.Group, outs: dict, skip=()):
    """The stacked operands of a group (and the vmap axis of each: None for one value every lane shares); the
    operands named in ``skip`` are left None."""
    values, axes = [], []
    for name in g.insts[0].probe.reads:
        if name in skip:
            values.append(None)
            axes.append(None)
            continue
        parts = g.reads[name]
        if len(parts) == 1 and parts[0].kind == "pre":
            value, batched = _pre(st, g, name)
            values.append(value)
            axes.append(0 if batched else None)
            continue
        value = _part(st, g, name, parts[0], outs)
        for part in parts[1:]:
            value = jnp.where(_mask_expr(part.mask), _part(st, g, name, part, outs), value)
        values.append(value)
        axes.append(0)
    return values, axes


def _run_groups(st: State, region: bp.Region, run_op) -> dict:
    outs: dict = {}
    joined: dict = {}  # (a, b) of a stitched pair -> its joined outputs
    ran: dict = {}  # unit id -> (template, operand values, vmap axes) it ran on (``contract`` reads them)
    for gid, g in enumerate(region.groups):
        if gid in outs:  # (the second group of a stitched pair)
            continue
        s, join = region.stitched.get(gid), region.joins.get(gid)
        lanes = len(g.insts)
        template = g.insts[0] if s is None else s.template
        if join is not None:  # an accumulation over split contraction tiles: one matmul over the joined tiles
            product = _run_lanes(st, join.template, *contract.joined_inputs(join, ran, lanes), lanes, run_op)[0]
            values, axes = contract.add_inputs(template, product, lanes)
        elif s is None:
            values, axes = _inputs(st, g, outs)
        else:
            ga, gb = region.groups[s.a], region.groups[s.b]
            skip = stitch.direct_names(s) | stitch.whole_names(s)

            def whole(name, s=s, ga=ga):
                value, batched = _read_lanes(st, stitch.whole_accesses(s, ga, name), ga.lane_access, ("whole", name))
                return value, (0 if batched else None)

            values, axes = stitch_lower.inputs(s, *_inputs(st, ga, outs, skip), *_inputs(st, gb, outs, skip), lanes,
                                         joined, whole)  # fmt: skip
        res = _run_lanes(st, template, values, axes, lanes, run_op)
        ran[gid] = (template, values, axes)
        if s is None:
            outs[gid] = res
        else:
            joined[(s.a, s.b)] = res
            outs[s.a], outs[s.b] = stitch_lower.outputs(s, res, st.zero_poison)
    return outs


def _run_lanes(st: State, template: bp.Inst, values: list, axes: list, lanes: int, run_op) -> list:
    """``template``'s op lowered once per lane (``jax.vmap`` over the stacked operands ``values``, vmap axes
    ``axes``): its outputs in probe order, each stacked over the lanes."""
    names = list(template.probe.reads)
    order = [n for n, _ in template.probe.writes]

    def lane(*vals):
        ls = _LaneState(st, template, dict(zip(names, vals)))
        run_op(template.op, ls)
        if not _matches(template.probe, ls.written):
            raise _NotBatchableError(f"{template.op.name} writes other than predicted")
        by_name = {n: v for n, v, _ in ls.written}
        return tuple(by_name[n] for n in order)

    if lanes == 1:
        res = lane(*(v if a is None else v[0] for v, a in zip(values, axes)))
        return [r[None] for r in res]
    res = jax.vmap(lane, in_axes=tuple(axes), axis_size=lanes)(*values)
    return list(res)


def run(item: Batched, st: State, run_op) -> None:
    """The region's groups, then the surviving writes. Nothing is written into ``st`` before the write-back, so
    a lowering that does not do what the plan predicted (``_NotBatchableError``) falls back to the unbatched ops
    exactly; the region is then marked and later traces run it unbatched at once."""
    region = item.region
    insts = region.insts
    if not region.stats.get("failed"):
        try:
            outs = _run_groups(st, region, run_op)
        except _NotBatchableError:
            region.stats["failed"] = True
    if region.stats.get("failed"):
        for inst in insts:
            run_op(inst.op, st)
        return
    for n, k in region.writeback:
        inst = insts[n]
        _apply(st, inst, k, outs[inst.group][k][inst.lane])
