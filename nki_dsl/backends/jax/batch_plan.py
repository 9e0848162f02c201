"""Batching plan (SLP-style vectorisation of a straight-line run): which ops run together as one op over a
stacked leading "lane" axis, where each lane's operands come from, and what is written back afterwards.

Why: an unrolled kernel (a software pipeline over heads and query tiles, a Python loop over tiles) hands XLA one
op per instruction; on CPU, XLA's compile time is mostly LLVM compiling each of the program's kernels, so it grows
with the count of separate ops (the ViT attention kernel: 56 kernels, ~2 s). Ops that do the same thing to
different data become one batched op (``jax.vmap`` of the op's lowering over the lanes), so the count is that of
distinct stages, not of items.

**Element-level dataflow, at lower time in NumPy.** Every index and mask of the run is known at trace time (ops
whose accesses of a tensor the run writes, or whose write masks, depend on a traced loop index end the run). For
each tensor the run writes, an array holds, per element, which output of which op last wrote it and at which
position of that output (-1: the value from before the run). Replaying the run in program order gives, for each
op and each operand it reads, the exact source of every element it reads: its own lane's producer, another
lane's, or the pre-run buffer. Masked writes write only the elements their mask keeps, so the stale rows a ragged
tile's masked write leaves in a reused ring slot are traced to the earlier item that wrote them.

**Renaming.** In JAX every buffer is a value: a batched op's outputs are fresh ``[lanes, ...]`` values, never
written into the buffer during the run. Storage reuse (ring slots shared by items n and n+3) then creates no
dependence: only true dataflow orders ops. A reader's operand is assembled from its sources' values (see
Operands). After the run, each tensor still live gets the writes that survive in it, in program order (the last
writer per element wins).

**Groups.** An op's *level* is one more than the highest level among the ops it reads from (0 when it reads only
pre-run values). Ops of the same level cannot depend on each other; ops of the same level and *key* (name,
attributes, immediates, result type, operand shapes, dtypes and buffers, index coefficients and the elements the
mask selects)
form one group, lanes in program order, and groups run level by level: isomorphic chains interleaved in program
order by a software pipeline fall into one group per stage whatever their positions. Almost-isomorphic ops (a
different shape or dtype) have different keys and are not merged.

**What an op reads and where it writes** comes from its spec (operands read, an accumulating write's destination
among them; result and written operands, each where the op's mask holds); ``batching`` checks every lowering
against it and runs the ops unbatched if one differs.

**Operands** are assembled from *parts*, later ones overriding earlier ones under static masks: the pre-run
tensor, or a producer group's stacked output read through an affine map of (lane, position) that is a strided
window (slices and reshapes, no gather: lane ``l`` reading lane ``l``, or ``l - 1``, at a fixed offset), or boxes
of several producer lanes placed side by side, or, for anything else, a gather with constant indices.

Cost: the plan is NumPy over every element the run touches (``MAX_ELEMENTS`` bounds it): ~0.2-0.3 s for the ViT
attention kernel's 263-op head-group body (5.8 million elements), ~0.6 s for 2,401 ops of small tiles
(``benchmarks/jax_speed.py --batch``), measured at load 8-12.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from nki_dsl.backends.jax import access as acc
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.nodes import Access, Op

MIN_SAVED = 8  # batch a run only when it removes at least this many ops from the program (sum of lanes - 1)
# Runs whose ops touch more elements than this (summed over their accesses) are left unbatched: the plan tracks
# every element in NumPy (the ViT attention kernel's 263-op head-group body: 5.8 million).
MAX_ELEMENTS = 1 << 25
RESULT = ""  # the output key of an op's result (operand names are never empty)


@dataclass(frozen=True)
class Probe:
    """What an op's lowering does (predicted from its spec, the same for every op of one key): operands read,
    outputs written with their masks."""

    reads: tuple[str, ...]
    writes: tuple[tuple[str, object], ...]  # (operand name or RESULT, mask over the written access or None)


@dataclass
class Inst:
    op: Op
    n: int  # position in the run
    key: object
    probe: Probe = None
    level: int = 0
    group: int = -1
    lane: int = -1
    # operand name -> (tensor root, source codes per element or None (all pre-run), positions per element)
    sources: dict = field(default_factory=dict)
    reads: dict = field(default_factory=dict)  # operand name -> the access its lowering reads (cut to a box)

    def read_access(self, name: str) -> Access:
        return self.reads.get(name) or self.op.operands[name]


@dataclass
class Group:
    insts: list  # lanes, in program order
    level: int
    reads: dict = field(default_factory=dict)  # operand name -> [Part, ...] (``classify_reads``)
    lane_access: dict = field(default_factory=dict)  # operand name -> its lanes' reads as one Access, or False


@dataclass
class Region:
    """A batched run: ``insts`` in program order, ``groups`` in the order they run, ``writeback`` the (inst, out
    key) pairs to apply to the state afterwards, in program order."""

    insts: list
    groups: list
    writeback: list
    stats: dict = field(default_factory=dict)
    stitched: dict = field(default_factory=dict)  # first group id -> ``stitch.Stitch`` of a pair run as one op
    joins: dict = field(default_factory=dict)  # unit id -> ``contract.Join``: an accumulation run as one matmul


def code(inst_n: int, k: int) -> int:
    return inst_n * 16 + k  # (an op has at most a handful of outputs)


def decode(c: int) -> tuple[int, int]:
    return divmod(int(c), 16)


def op_key(op: Op, signature, mask_key) -> object:
    return (signature(op), mask_key(op))


@functools.lru_cache(maxsize=4096)
def _split(e: Affine):
    """``access.split`` of an index expression, cached: a long run names the same expressions again and again."""
    return acc.split(e)


def flat_indices(index: tuple, shape: tuple, held: tuple, ivars: dict):
    """Flat element positions (int64, of ``shape``) in a tensor held with shape ``held`` of an access (``index``:
    one Affine per dimension, as the state holds the tensor), clipped into the tensor as reads clip them, and
    which lie inside it (None: all); None when an index depends on a traced variable."""
    flat, inside = np.zeros((1,) * len(shape), np.int64), None
    stride = 1
    for e, n in reversed(list(zip(index, held))):
        axes, rest = _split(e)
        if any(name not in ivars for name, _ in rest.terms):
            return None
        r = acc.value_of(rest, ivars)
        v = (acc.axis_values_np(axes, shape).astype(np.int64) + r) if axes else np.full((1,) * len(shape), r, np.int64)
        if v.size and (v.min() < 0 or v.max() >= n):
            ok = (v >= 0) & (v < n)
            inside = ok if inside is None else inside & ok
            v = np.clip(v, 0, max(n - 1, 0))
        flat = flat + stride * v
        stride *= n
    flat = np.broadcast_to(flat, shape)
    return flat, (None if inside is None else np.broadcast_to(inside, shape))


def box_view(index: tuple, shape: tuple, held: tuple, ivars: dict):
    """The access as basic slices of the tensor held with shape ``held`` (a NumPy view, no index arrays), when
    every dimension is a constant or a constant plus one access axis (coefficient 1, axes in order) inside the
    tensor; else None."""
    key, last = [], -1
    used = set()
    for e, n in zip(index, held):
        axes, rest = _split(e)
        if any(name not in ivars for name, _ in rest.terms):
            return None
        r = acc.value_of(rest, ivars)
        axes = {a: c for a, c in axes.items() if shape[a] != 1}
        if not axes:
            if not 0 <= r < n:
                return None
            key.append(slice(r, r + 1))  # (a slice, not an index: the result stays a view, never a scalar)
            continue
        if len(axes) != 1:
            return None
        ((a, c),) = axes.items()
        if c != 1 or a <= last or r < 0 or r + shape[a] > n:
            return None
        last = a
        used.add(a)
        key.append(slice(r, r + shape[a]))
    if any(shape[a] != 1 and a not in used for a in range(len(shape))):
        return None
    return tuple(key)


@functools.lru_cache(maxsize=100)  # (a run writes few distinct shapes; a process lowers few kernels at once)
def _positions(shape: tuple) -> np.ndarray:
    """The flat position of every element of ``shape`` (read-only, shared: a run writes few distinct shapes)."""
    here = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    here.flags.writeable = False
    return here


class _Tracked:
    """Per element of one tensor: the code of the output that last wrote it (-1: none in the run), the element's
    position in that output, and the level of the op that wrote it (-1: none)."""

    def __init__(self, held: tuple):
        self.held = held
        self.writer = np.full(held, -1, np.int32)
        self.pos = np.zeros(held, np.int32)
        self.level = np.full(held, -1, np.int32)

    def read(self, v, index, ivars):
        """(writer codes, positions, highest writer level) of the elements access ``v`` reads; None when an index
        is traced."""
        shape = tuple(v.shape)
        box = box_view(index, shape, self.held, ivars)
        if box is not None:
            lvl = int(self.level[box].max()) if math.prod(shape) else -1
            return self.writer[box].reshape(shape).copy(), self.pos[box].reshape(shape).copy(), lvl
        fi = flat_indices(index, shape, self.held, ivars)
        if fi is None:
            return None
        idx = fi[0]
        lvl = int(self.level.reshape(-1)[idx].max()) if idx.size else -1
        return self.writer.reshape(-1)[idx], self.pos.reshape(-1)[idx], lvl

    def write(self, index, shape, ivars, mask, c, lvl) -> bool:
        here = _positions(shape)
        box = box_view(index, shape, self.held, ivars) if index is not None else ()
        if box is not None:
            w = self.writer[box] if box != () else self.writer
            p = self.pos[box] if box != () else self.pos
            q = self.level[box] if box != () else self.level
            wshape = w.shape
            if mask is None:
                w[...] = c
                p[...] = here.reshape(wshape)
                q[...] = lvl
            else:
                m = np.broadcast_to(mask, shape).reshape(wshape)
                w[m] = c
                p[m] = here.reshape(wshape)[m]
                q[m] = lvl
            return True
        fi = flat_indices(index, shape, self.held, ivars)
        if fi is None:
            return False
        idx, keep = fi
        if mask is not None:
            keep = np.broadcast_to(mask, shape) if keep is None else keep & np.broadcast_to(mask, shape)
        if keep is not None:
            idx, here = idx[keep], here[keep]
        self.writer.reshape(-1)[idx] = c
        self.pos.reshape(-1)[idx] = here
        self.level.reshape(-1)[idx] = lvl
        return True


def analyse(insts: list, written_roots: set, held_shape, index_of, root_of, ivars: dict):
    """Fill each instance's sources and level; returns the final writer array per tensor (root -> source code per
    element), or None when an access cannot be analysed (a traced index)."""
    tracked = {r: _Tracked(tuple(held_shape(r))) for r in written_roots}
    for inst in insts:
        op, lvl = inst.op, 0
        for name in inst.probe.reads:
            v = inst.read_access(name)
            root = root_of(v.tensor.name)
            t = tracked.get(root)
            if t is None:
                inst.sources[name] = (root, None, None)
                continue
            got = t.read(v, index_of(v), ivars)
            if got is None:
                return None
            src, pos, highest = got
            inst.sources[name] = (root, src, pos)
            lvl = max(lvl, highest + 1)
        inst.level = lvl
        for k, (name, mask) in enumerate(inst.probe.writes):
            c = code(inst.n, k)
            if name == RESULT:
                root, shape = root_of(op.result.name), tuple(op.result.type.shape)
                if tuple(tracked[root].held) != shape:
                    return None
                ok = tracked[root].write(None, shape, ivars, None, c, lvl)
            else:
                v = op.operands[name]
                root, shape = root_of(v.tensor.name), tuple(v.shape)
                ok = tracked[root].write(index_of(v), shape, ivars, mask, c, lvl)
            if not ok:
                return None
    return {r: t.writer.reshape(-1) for r, t in tracked.items()}


def form_groups(insts: list) -> list:
    """Groups of (key, level), each in program order; ordered by level, then by first op."""
    by: dict = {}
    for inst in insts:
        by.setdefault((inst.key, inst.level), []).append(inst)
    groups = sorted(by.values(), key=lambda g: (g[0].level, g[0].n))
    out = []
    for gid, members in enumerate(groups):
        for lane, inst in enumerate(members):
            inst.group, inst.lane = gid, lane
        out.append(Group(members, members[0].level))
    return out


def classify_reads(groups: list, insts: list, skip=frozenset()) -> None:
    """Per group and operand, how the stacked operand is assembled (``Read``); not for the (group id, operand)
    pairs of ``skip`` (read otherwise: ``stitch``)."""
    for gid, g in enumerate(groups):
        for name in g.insts[0].probe.reads:
            if (gid, name) not in skip:
                g.reads[name] = _read_plan(g, name, insts, groups)


@dataclass
class Part:
    """Where some elements of a stacked operand come from: ``kind`` "pre" (the pre-run tensor, read lane by
    lane), "box" (lanes ``lanes`` of output ``k`` of group ``group``, the window at ``offsets`` of each) or
    "gather" (output ``k`` of group ``group`` flattened, at ``index`` per element); ``mask`` ([lanes, ...] bool,
    None: every element) selects the elements it gives."""

    kind: str
    mask: object = None
    maps: tuple = ()  # "affine": (A, b), the producer's (lane, coordinates) = (lane, coordinates) @ A + b
    box: tuple = ()  # "affine" over a box of the operand only: (starts, sizes), the map relative to the starts
    pieces: tuple = ()  # "pieces": per lane, ((producer lane, box starts, box sizes, (A, b) over the box), ...)
    group: int = -1
    k: int = -1
    lanes: tuple = ()
    offsets: tuple = ()
    index: object = None


def _read_plan(g: Group, name: str, insts: list, groups: list) -> list:
    """The parts of the stacked operand ``name`` of group ``g``, later ones overriding earlier ones."""
    shape = tuple(g.insts[0].read_access(name).shape)
    srcs = [inst.sources[name][1] for inst in g.insts]
    poss = [inst.sources[name][2] for inst in g.insts]
    if all(s is None for s in srcs):
        return [Part("pre")]
    K = len(g.insts)
    stacked = np.stack([np.full(shape, -1, np.int32) if s is None else s for s in srcs])
    pos = np.stack([np.zeros(shape, np.int32) if p is None else p for p in poss])
    # (codes are small non-negative ints, -1 the pre-run value: counting beats sorting)
    codes = np.flatnonzero(np.bincount((stacked + 1).ravel())) - 1
    # each code's (producer group, output) and lane; the part an element comes from is one of those pairs
    pairs = sorted({(insts[c // 16].group, c % 16) for c in codes.tolist() if c >= 0})
    lut = np.zeros(int(codes[-1]) + 2, np.int32)  # code + 1 -> lane of its producer
    which = np.full(int(codes[-1]) + 2, -1, np.int32)  # code + 1 -> index of its pair (-1: pre-run)
    for c in codes.tolist():
        if c >= 0:
            lut[c + 1] = insts[c // 16].lane
            which[c + 1] = pairs.index((insts[c // 16].group, c % 16))
    single = len(pairs) == 1 and codes[0] >= 0  # one producer output gives every element (the common case)
    prod_lane = lut[stacked + 1]
    part_of = None if single else which[stacked + 1]
    parts = [] if codes[0] >= 0 else [Part("pre")]
    for j, (gid, k) in enumerate(pairs):
        sel = np.ones(stacked.shape, bool) if single else part_of == j
        producer = groups[gid].insts[0]
        out_name = producer.probe.writes[k][0]
        out_shape = tuple(producer.op.result.type.shape if out_name == RESULT else producer.op.operands[out_name].shape)
        k_prod = len(groups[gid].insts)
        part = (_affine(sel, prod_lane, pos, shape, out_shape, K, k_prod, whole=single)
                or _pieces(sel, prod_lane, pos, shape, out_shape, K))  # fmt: skip
        if part is None:
            size = math.prod(out_shape)
            part = Part("gather", index=np.where(sel, prod_lane.astype(np.int64) * size + pos, 0))
        part.mask, part.group, part.k = (None if single else sel), gid, k
        parts.append(part)
    parts[0].mask = None  # the base: every element the later parts do not give
    return parts


def fit_affine(sel: np.ndarray, lane, pos: np.ndarray, out_shape: tuple, lo=None, whole: bool = False):
    """Integer ``(A, b)`` such that, at every selected position ``x`` of the grid ``sel``, the producer's
    coordinates ``(lane[x], *unravel(pos[x], out_shape))`` are ``(x - lo) @ A + b`` (``lane``: an int grid, or
    None to leave the lane out); found from the first selected position and one more along each axis, then
    checked everywhere at once (``whole``: ``sel`` selects every position). None when no such map fits."""
    first = int(np.argmax(sel))
    if not sel.flat[first]:
        return None
    x0 = np.array(np.unravel_index(first, sel.shape), np.int64)
    lo = np.zeros(sel.ndim, np.int64) if lo is None else np.asarray(lo)

    def y(x):
        c = list(np.unravel_index(int(pos[tuple(x)]), out_shape)) if out_shape else []
        return np.array(([int(lane[tuple(x)])] if lane is not None else []) + c, np.int64)

    y0 = y(x0)
    A = np.zeros((sel.ndim, len(y0)), np.int64)
    for a in range(sel.ndim):
        line = sel[tuple(slice(None) if k == a else int(x0[k]) for k in range(sel.ndim))]
        others = np.flatnonzero(line)
        others = others[others != x0[a]]
        if others.size == 0:
            continue
        x1 = x0.copy()
        x1[a] = others[0]
        diff = y(x1) - y0
        if (diff % (x1[a] - x0[a])).any():
            return None
        A[a] = diff // (x1[a] - x0[a])
    b = y0 - (x0 - lo) @ A
    # bounds: each coordinate, affine in x, is extremal at the corners of the selection's bounding box
    box_lo, box_sizes = ([0] * sel.ndim, sel.shape) if whole else bounding_box(sel)
    lo_box = np.asarray(box_lo) - lo
    hi_box = lo_box + np.asarray(box_sizes) - 1
    least = b + np.minimum(A * lo_box[:, None], A * hi_box[:, None]).sum(axis=0)
    most = b + np.maximum(A * lo_box[:, None], A * hi_box[:, None]).sum(axis=0)
    limits = np.array(([np.iinfo(np.int64).max] if lane is not None else []) + list(out_shape), np.int64)
    if (least < 0).any() or (most >= limits).any():
        return None
    # then every selected position at once: the flat position (and the lane) the map gives against the actual
    # ones, compared apart (the bounds above keep each predicted coordinate inside ``out_shape``, so the flat
    # positions agree exactly when the coordinates do): no full-size (lane, position) array is built
    strides = np.array([int(np.prod(out_shape[j + 1:])) for j in range(len(out_shape))], np.int64)
    rows = [(A[:, 1:] if lane is not None else A) @ strides, int((b[1:] if lane is not None else b) @ strides), pos]
    checks = [rows] if lane is None else [rows, [A[:, 0], int(b[0]), lane]]
    for coef, const, actual in checks:
        pred = np.full((1,) * sel.ndim, const, np.int64)
        for a, n in enumerate(sel.shape):
            if coef[a]:
                pred = pred + coef[a] * (np.arange(n) - lo[a]).reshape([n if k == a else 1 for k in range(sel.ndim)])
        if whole:
            if not (actual == pred).all():
                return None
        elif not (np.broadcast_to(pred, sel.shape)[sel] == actual[sel]).all():
            return None
    return A, b


def bounding_box(sel: np.ndarray):
    """The least box holding every True of ``sel`` (not empty): (starts, sizes)."""
    lo, sizes = [], []
    for a in range(sel.ndim):
        hit = np.flatnonzero(np.any(sel, axis=tuple(k for k in range(sel.ndim) if k != a)))
        lo.append(int(hit[0]))
        sizes.append(int(hit[-1]) - int(hit[0]) + 1)
    return lo, tuple(sizes)


def _affine(sel, prod_lane, pos, shape, out_shape, K, k_prod, whole=False):
    """An "affine" part when the producer's (lane, position) of every selected element is an affine function of
    the operand's (lane, position) and that map is a strided box: one window of the producer's stacked output,
    sliced and reshaped."""
    fit = fit_affine(sel, prod_lane, pos, out_shape, whole=whole)
    if fit is None:
        return None
    full = (K, *shape)
    p = affine_plan(fit, full, (k_prod, *out_shape))
    if p.box and p.in_bounds:
        return Part("affine", maps=fit)
    # only the selection's bounding box need be read (the rest is padding the part's mask discards): the map
    # there may stay inside the producer where it leaves it elsewhere (lane l reading lane l - 1, but not lane 0)
    lo, sizes = bounding_box(sel)
    A, b = fit
    shifted = (A, b + np.asarray(lo) @ A)
    p = affine_plan(shifted, sizes, (k_prod, *out_shape))
    if not (p.box and p.in_bounds):
        return None
    return Part("affine", maps=shifted, box=(tuple(lo), sizes))


@dataclass(frozen=True)
class _Source:
    """The tensor an access of a stacked output is planned against (only its name and shape are looked at)."""

    shape: tuple

    @property
    def name(self):
        return "(batched output)"

    @property
    def type(self):
        return self


def affine_plan(maps, shape, source_shape) -> acc.AccessPlan:
    """The access plan reading ``source[(x @ A + b)]`` at every position ``x`` of ``shape``."""
    return acc.plan(Access(_Source(tuple(source_shape)), access_of(None, maps, shape), tuple(shape)), {})


def _pieces(sel, prod_lane, pos, shape, out_shape, K):
    """A "pieces" part when, for each lane, the elements each producer lane gives it are a whole box of the
    operand read by an affine map from that producer lane's output (an operand assembled from several lanes'
    tiles)."""
    per_lane = []
    for lane in range(K):
        pieces = []
        for p in np.unique(prod_lane[lane][sel[lane]]).tolist():
            s = sel[lane] & (prod_lane[lane] == p)
            where = np.nonzero(s)
            lo = [int(w.min()) for w in where]
            sizes = [int(w.max()) - a + 1 for w, a in zip(where, lo)]
            if math.prod(sizes) != int(s.sum()):
                return None
            fit = fit_affine(s, None, pos[lane], out_shape, lo)
            if fit is None:
                return None
            pieces.append((p, tuple(lo), tuple(sizes), fit))
        per_lane.append(tuple(pieces))
    return Part("pieces", pieces=tuple(per_lane))


def access_of(tensor, maps, shape) -> tuple:
    """Index expressions (one per dimension of the source) of the affine map ``maps`` = (A, b) over the axes of
    an access of ``shape``."""
    A, b = maps
    return tuple(Affine.of(int(b[j]), **{f"d{a}": int(A[a, j]) for a in range(A.shape[0]) if A[a, j]})
                 for j in range(A.shape[1]))  # fmt: skip


def _shift_axes(e: Affine) -> Affine:
    """``e`` with access axis ``d<k>`` renamed ``d<k+1>`` (room for a leading lane axis)."""
    terms = [(f"d{var_number(v) + 1}" if var_kind(v) == "axis" else v, c) for v, c in e.terms]
    return Affine.of(e.const, **dict(terms))


def lane_access(accesses: list):
    """The lanes' accesses as one access with a leading lane axis ``d0``, when they read the same tensor, with
    the same shape and index coefficients, at constants that step by the same amount from lane to lane; else
    None."""
    first = accesses[0]
    for a in accesses:
        if a.tensor.name != first.tensor.name or tuple(a.shape) != tuple(first.shape):
            return None
        if any(e.terms != f.terms for e, f in zip(a.index, first.index)):
            return None
    consts = np.array([[e.const for e in a.index] for a in accesses], np.int64)
    step = consts[1] - consts[0] if len(accesses) > 1 else np.zeros(consts.shape[1], np.int64)
    if not (consts == consts[0] + np.arange(len(accesses))[:, None] * step).all():
        return None
    index = tuple(_shift_axes(e) + Affine.var("d0", int(d)) if d else _shift_axes(e) for e, d in zip(first.index, step))
    return Access(first.tensor, index, (len(accesses), *first.shape))


def writeback(final: dict, live) -> list:
    """(inst position, output index) of the writes that survive in a live tensor, in program order."""
    alive = set()
    for root, w in final.items():
        if live(root):
            alive.update(int(c) for c in np.unique(w) if c >= 0)
    return sorted(decode(c) for c in alive)
