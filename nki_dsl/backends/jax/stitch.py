"""Stitching a batched group of full tiles to the group of their ragged twins: one op over the tiles' rows laid
end to end (128 + 69 = 197), instead of two ops.

Why: a ragged dimension (the ViT attention kernel's 197 tokens) makes every stage of a software pipeline two
groups for ``batching``: the full 128-row tiles, and the last tile, whose mask keeps 69 rows and which ``trim``
computes on those rows only. Their keys differ (the mask), so XLA gets two ops per stage, each its own kernel for
LLVM to compile. Padding the short tile to 128 rows merges them but computes (and selects away) 59 rows of poison
per lane; concatenating computes exactly the rows both compute now.

When: two groups of one level (neither reads the other) with the same number of lanes and the same op (name,
attributes, immediates, operand and result shapes: ``reroll._signature``), where group ``a`` computes its whole
iteration space unmasked and group ``b`` computes the box its static mask bounds along one iteration axis ``ax``
(``trim``), nothing else of its mask left. Every operand whose axis maps onto ``ax`` (``trim.axes``, the table that
makes computing on a box exact: along ``ax`` each output position reads only the operand positions mapped to it)
is laid end to end, lane ``i`` of ``a`` then lane ``i`` of ``b``; every other operand must be the same elements in
both lanes (the same sources, ``batch_plan.Inst.sources``: the K^T both tiles of a head multiply by). Every output
must have an axis mapped onto ``ax`` (a reduction over ``ax`` has none: not stitched).

How: the op is lowered once per lane over the joined extent (an op like ``a``'s with the joined shapes, no mask),
vmapped over the lanes as ``batching`` lowers a group, and its outputs are cut back into each group's stacked
outputs (``b``'s padded with poison to its full extent, as ``trim`` pads a box): the groups that read them and the
write-back are planned as before. Every element is computed from the same operand elements by the same primitives
as in the two ops. XLA folds the cut-and-join between consecutive stitched stages (slices of a concatenation). An
operand both groups read from before the run, whose two tiles lie end to end in one tensor (the rows of a ragged
load), is read once over the joined extent (``Stitch.whole``) instead of twice and joined.

This module plans the pairs (``pair_groups``); ``stitch_lower.py`` lowers a planned pair's operands and outputs.

Switches, read at each lowering: ``NKI_JAX_STITCH=0`` (off), or ``ENABLED`` (tests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from nki_dsl.backends.jax import batch_plan as bp
from nki_dsl.ir.nodes import Access, Op, Tensor

ENABLED = True


def enabled() -> bool:
    return ENABLED and os.environ.get("NKI_JAX_STITCH", "1") != "0"


@dataclass(frozen=True)
class Stitch:
    """Groups ``a`` (full tiles) and ``b`` (ragged twins) lowered as one op (``template``) over ``a``'s extent
    ``n_a`` then ``b``'s box (``lo``, ``extent``) of ``n_b`` along each operand's joined axis."""

    a: int
    b: int
    template: bp.Inst  # the joined op, its probe (reads as a's, writes unmasked)
    joined: tuple  # per read operand (in probe order): its operand axis laid end to end, or None (shared)
    # per read operand: None, or (producer pair (a, b), output, (A, b) map) when it is one affine read of the
    # joined output of a stitched producer pair (no cut and join in between: XLA does not fold a concatenation
    # of transposes, which cost the ViT kernel 0.08 s of compile and 30% of its run time)
    direct: tuple
    outputs: tuple  # per output (in probe order): (axis, full extent in b, b's box start, poison dtype name)
    n_a: int
    extent: int
    # per read operand: True when it is laid end to end from elements before the run that lie end to end in one
    # tensor (b's right after a's along its joined axis): then read once over the joined extent (``whole``), one
    # slice instead of two joined by a concatenation (which XLA does not fold through the reads' reshapes and
    # transposes: the ViT kernel's q^T tiles cost a kernel of their own to join)
    whole: tuple = ()


def _cut_of(ctx, name: str) -> dict:
    return ctx._cut(name) if isinstance(ctx.op.operands.get(name), Access) else {}


def _same_sources(x: bp.Inst, y: bp.Inst, name: str) -> bool:
    """Do ``x`` and ``y`` read the same elements as operand ``name``?"""
    (rx, sx, px), (ry, sy, py) = x.sources[name], y.sources[name]
    vx, vy = x.read_access(name), y.read_access(name)
    if rx != ry or tuple(vx.shape) != tuple(vy.shape):
        return False
    if (sx is None) != (sy is None):
        return False
    if sx is not None and not (np.array_equal(sx, sy) and np.array_equal(px, py)):
        return False
    # elements from before the run (code -1, or all of them) are read through the accesses themselves
    if sx is None or (sx < 0).any():
        return vx.tensor.name == vy.tensor.name and vx.index == vy.index
    return True


def _joined_op(op: Op, joined: dict, total: dict, result_axis) -> Op:
    """``op`` with the operands of ``joined`` (name -> axis) and its result over the joined extents, unmasked."""
    operands = {}
    for name, v in op.operands.items():
        if name in joined:
            shape = list(v.shape)
            shape[joined[name]] = total[name]
            v = Access(v.tensor, v.index, tuple(shape))
        operands[name] = v
    result = op.result
    if result is not None:
        t = result.type
        shape = list(t.shape)
        shape[result_axis] = total[bp.RESULT]
        result = Tensor(result.name, type(t)(tuple(shape), t.dtype, t.buffer, t.par_axis), result.kind)
    return Op(op.name, operands, op.attrs, result, op.loc)


def _output_shape(inst: bp.Inst, k: int) -> tuple:
    name = inst.probe.writes[k][0]
    return tuple(inst.op.result.type.shape if name == bp.RESULT else inst.op.operands[name].shape)


@dataclass
class _Codes:
    """What ``pair_groups`` looks producers up in: per output code (``batch_plan.code``; the last entry, which
    code -1 indexes, the pre-run value) its producer's lane (``lane_of``) and group * 16 + output (``output_of``,
    -1 for the pre-run value); and each group's operands' source codes and positions, stacked over its lanes
    once (``stacked``)."""

    lane_of: np.ndarray
    output_of: np.ndarray
    memo: dict

    def stacked(self, g: bp.Group, name: str):
        """(codes, positions) of operand ``name`` of every lane of ``g``, ``[lanes, ...]``; None when a lane reads
        only pre-run values or nothing."""
        key = (id(g), name)
        if key not in self.memo:
            src = [inst.sources[name][1] for inst in g.insts]
            if any(s is None or s.size == 0 for s in src):
                self.memo[key] = None
            else:
                self.memo[key] = (np.stack(src), np.stack([inst.sources[name][2] for inst in g.insts]))
        return self.memo[key]


def _producer(g: bp.Group, name: str, codes: _Codes):
    """(group, output) that gives every element of operand ``name`` of every lane of ``g``, or None."""
    got = codes.stacked(g, name)
    if got is None:
        return None
    tags = codes.output_of[got[0]]
    first = int(tags.flat[0])
    if first < 0 or int(tags.min()) != first or int(tags.max()) != first:
        return None
    return divmod(first, 16)


def _direct(ga: bp.Group, gb: bp.Group, name: str, axis: int, pairs: dict, codes: _Codes, groups: list):
    """The joined operand ``name`` (laid end to end along ``axis``) as one affine read of a stitched producer
    pair's joined output: (pair, output, map), or None."""
    pa, pb = _producer(ga, name, codes), _producer(gb, name, codes)
    if pa is None or pb is None or pa[1] != pb[1]:
        return None
    p = pairs.get((pa[0], pb[0]))
    if p is None:
        return None
    k = pa[1]
    out_axis, _, lo, _ = p.outputs[k]
    out_shape = _output_shape(groups[p.a].insts[0], k)
    fits = []
    for g in (ga, gb):  # each side's map into its own group's output (lane, coordinates)
        src, pos = codes.stacked(g, name)
        fit = bp.fit_affine(np.ones(src.shape, bool), codes.lane_of[src], pos, out_shape, whole=True)
        if fit is None:
            return None
        fits.append((fit, src.shape))
    ((A, b), shape_a), ((A_b, b_b), shape_b) = fits
    # b's elements must come from its box (laid after a's extent in the joined output), and one map must give
    # both sides: at b's position x - n_a (along the joined axis) it reads joined coordinate y + (n_a - lo)
    o = out_axis + 1
    corners = np.stack([np.zeros(len(shape_b), np.int64), np.asarray(shape_b, np.int64) - 1])
    along = b_b[o] + np.minimum(A_b[:, o] * corners[0], A_b[:, o] * corners[1]).sum(), \
        b_b[o] + np.maximum(A_b[:, o] * corners[0], A_b[:, o] * corners[1]).sum()
    if along[0] < lo or along[1] >= lo + p.extent or not np.array_equal(A, A_b):
        return None
    shifted = b_b - shape_a[axis + 1] * A[axis + 1]
    shifted[o] += p.n_a - lo
    if not np.array_equal(shifted, b):
        return None
    joined_shape = list(out_shape)
    joined_shape[out_axis] = p.n_a + p.extent
    lanes_shape = list(shape_a)
    lanes_shape[axis + 1] += shape_b[axis + 1]
    plan = bp.affine_plan((A, b), lanes_shape, (len(groups[p.a].insts), *joined_shape))
    if not (plan.box and plan.in_bounds):
        return None
    return (p.a, p.b), k, (A, b)


def _pre_run_only(inst: bp.Inst, name: str) -> bool:
    src = inst.sources[name][1]
    return src is None or not (src >= 0).any()


def _whole(ga: bp.Group, gb: bp.Group, name: str, axis: int, shape: tuple, flat_of) -> bool:
    """Does every lane of ``a`` then ``b`` read, as operand ``name``, the pre-run elements of one access of
    ``shape`` (lane ``i`` of ``a``'s access over the joined extent along ``axis``)? ``flat_of(access)``: the flat
    positions an access reads in its tensor, None when not all inside it or not known at trace time."""
    for x, y in zip(ga.insts, gb.insts):
        if not (_pre_run_only(x, name) and _pre_run_only(y, name)):
            return False
        va, vb = x.read_access(name), y.read_access(name)
        n = va.shape[axis]
        if va.tensor.name != vb.tensor.name or n + vb.shape[axis] != shape[axis]:
            return False
        fj, fa, fb = flat_of(Access(va.tensor, va.index, shape)), flat_of(va), flat_of(vb)
        if fj is None or fa is None or fb is None:
            return False
        if not (np.array_equal(fj[(slice(None),) * axis + (slice(0, n),)], fa)
                and np.array_equal(fj[(slice(None),) * axis + (slice(n, None),)], fb)):  # fmt: skip
            return False
    return True


def whole_accesses(s: Stitch, ga: bp.Group, name: str) -> list:
    """Per lane, the access read once for operand ``name`` of a pair (``Stitch.whole``): lane ``i`` of ``a``'s,
    over the joined extent."""
    shape = tuple(s.template.read_access(name).shape)
    return [Access(x.read_access(name).tensor, x.read_access(name).index, shape) for x in ga.insts]


def whole_names(s: Stitch) -> set:
    return {n for n, w in zip(s.template.probe.reads, s.whole) if w}


def _pair(
    ga: bp.Group, gb: bp.Group, ctx_of, gids, types, pairs, codes: _Codes, groups, flat_of=None
) -> Stitch | None:
    """The stitch of full-tile group ``ga`` and ragged group ``gb``, or None when they do not qualify."""
    ia, ib = ga.insts[0], gb.insts[0]
    ca, cb = ctx_of(ia), ctx_of(ib)
    if ca.full_mask is not None or ca.box or cb.box is None or len(cb.box) != 1 or cb.mask is not None:
        return None
    ((ax, (lo, extent)),) = cb.box.items()
    n_a = ca.full_shape[ax]
    if n_a != cb.full_shape[ax]:
        return None
    # every lane of b has the same box (the mask is part of the key); check each operand's role on every lane
    joined, total = {}, {}
    for name in ia.probe.reads:
        cut = _cut_of(cb, name)
        if cut:
            ((k, _),) = cut.items()
            joined[name], total[name] = k, n_a + extent
        elif not all(_same_sources(x, y, name) for x, y in zip(ga.insts, gb.insts)):
            return None
    outputs = []
    for name, _ in ia.probe.writes:
        if name == bp.RESULT:
            axis, full, dtype = ax, cb.full_shape[ax], ia.op.result.type.dtype
            total[bp.RESULT] = n_a + extent
        else:
            cut = _cut_of(cb, name)
            if not cut:
                return None
            ((axis, _),) = cut.items()
            v = ia.op.operands[name]
            full, dtype = v.shape[axis], types(v.tensor.name)
            if name not in joined:  # (written only: its access in the joined op spans the joined extent too)
                joined[name], total[name] = axis, n_a + extent
        outputs.append((axis, full, lo, dtype))
    op = _joined_op(ia.op, joined, total, ax)
    probe = bp.Probe(ia.probe.reads, tuple((name, None) for name, _ in ia.probe.writes))
    template = bp.Inst(op, -1, None, probe)
    laid = tuple(joined.get(n) for n in ia.probe.reads)
    direct = tuple(None if k is None else _direct(ga, gb, n, k, pairs, codes, groups)
                   for n, k in zip(ia.probe.reads, laid))  # fmt: skip
    whole = tuple(k is not None and d is None and flat_of is not None
                  and _whole(ga, gb, n, k, tuple(template.read_access(n).shape), flat_of)
                  for n, k, d in zip(ia.probe.reads, laid, direct))  # fmt: skip
    return Stitch(gids[id(ga)], gids[id(gb)], template, laid, direct, tuple(outputs), n_a, extent, whole)


def pair_groups(groups: list, insts: list, ctx_of, types, flat_of=None) -> dict:
    """``{first group id: Stitch}`` for the pairs of groups to lower as one op (each group in one pair at most),
    planned level by level (a pair's operands may be read straight from a lower pair's joined output, or from
    before the run in one piece: ``flat_of``, see ``_whole``)."""
    if not enabled():
        return {}
    gids = {id(g): i for i, g in enumerate(groups)}
    # per output code (``batch_plan.code``; the last entry, which -1 indexes: the pre-run value): its producer's
    # lane, and group * 16 + output (indexed by the codes as they are: no shifted copy of every operand's codes)
    n, k = np.divmod(np.arange(16 * len(insts)), 16)
    lane_of = np.append(np.array([inst.lane for inst in insts], np.int32)[n], 0)
    output_of = np.append(np.array([inst.group for inst in insts], np.int32)[n] * 16 + k, -1).astype(np.int32)
    codes = _Codes(lane_of, output_of, {})
    pairs: dict = {}  # (a, b) -> Stitch
    by: dict = {}
    for g in groups:
        sig = g.insts[0].key[0]  # (the op's signature; the key's other half is its mask)
        by.setdefault((g.level, sig, len(g.insts)), []).append(g)
    out = {}
    for members in by.values():
        if len(members) < 2:
            continue
        used = set()
        for ga in members:
            for gb in members:
                if ga is gb or id(ga) in used or id(gb) in used:
                    continue
                s = _pair(ga, gb, ctx_of, gids, types, pairs, codes, groups, flat_of)
                if s is not None:
                    used |= {id(ga), id(gb)}
                    out[min(s.a, s.b)] = pairs[(s.a, s.b)] = s
    return out


def direct_reads(stitched: dict) -> set:
    """(group id, operand) of every operand a stitched pair reads straight from a producer pair or in one piece
    from before the run (``classify_reads`` need not plan those)."""
    return {(g, n) for s in stitched.values() for g in (s.a, s.b) for n in direct_names(s) | whole_names(s)}


def direct_names(s: Stitch) -> set:
    """The operands read straight from a producer pair's joined output (the groups' own reads are not needed)."""
    return {n for n, d in zip(s.template.probe.reads, s.direct) if d is not None}
