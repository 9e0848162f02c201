"""Joining an accumulation over split contraction tiles into one matmul: ``acc = S1.T @ M1; acc += S2.T @ M2``
(batched groups, or stitched pairs of them) lowered as ``acc = [S1; S2].T @ [M1; M2]``.

Why: a contraction tiled into 128-row tiles with a ragged last tile (the ViT attention kernel's ``P V`` over 197
keys: 128 + 69) is two matmul groups for ``batching``, their shapes differ. XLA then gets two dots, their sum, and
a slice of each operand per dot: on CPU each slice is a kernel of its own for LLVM to compile (the operands of a
library dot must be whole arrays), ~0.1 s of the ViT kernel's first call. One dot over the joined contraction
reads the operands laid end to end, which XLA folds into the arrays the slices were cut from.

When: four units of one batched region (a unit is a group, or a stitched pair run as one op), every lane of one
reading the same lane of the other at the same positions (an identity map, ``_source``):

* ``mma``, ``mmb``: ``nisa.nc_matmul``, the same attributes and result shape, fp32 results, plain mode;
* ``set``: ``assign`` (no accumulation) of ``mma``'s result;
* ``add``: ``assign`` accumulating ``add`` into ``set``'s output (fp32, so ``set`` stored ``mma``'s result
  exactly) of ``mmb``'s result, under the same write mask as ``set``.

How: when ``add`` runs, the two matmuls' operands (as their units read them, kept by ``batching._run_groups``) are
laid end to end along the contraction (partition) axis and one matmul runs on them; ``add`` itself runs on that
result and zeros (``0 + x``: the same lowering, casts and masks). Every element is the same sum of the same fp32
products, grouped differently (one dot's summation instead of two dots and an add): it may differ in the last bit
or two, as a dot on a differently shaped operand does (``batching``'s docstring). ``mma``, ``mmb`` and ``set`` still
run; XLA drops what nothing reads any more (their results, when ``add``'s is the one that survives).

Switches, read at each lowering: ``NKI_JAX_CONTRACT=0`` (off), or ``ENABLED`` (tests).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from nki_dsl.backends.jax import batch_plan as bp
from nki_dsl.ir.nodes import Access, Op

ENABLED = True
MATMULS = ("nisa.nc_matmul",)  # (stationary [K, M], moving [K, N]) -> [M, N], contraction over axis 0 of both
CONTRACTED = ("stationary", "moving")


def enabled() -> bool:
    return ENABLED and os.environ.get("NKI_JAX_CONTRACT", "1") != "0"


@dataclass(frozen=True)
class Join:
    """Unit ``add`` computed from units ``mma`` and ``mmb``'s operands by ``template`` (their matmul over the
    joined contraction, ``k_a`` + ``k_b`` rows)."""

    add: int
    mma: int
    mmb: int
    template: bp.Inst
    k_a: int


def unit_of(groups: list, stitched: dict) -> dict:
    """Group id -> the id of the unit it runs in (a stitched pair runs under its first group's id)."""
    units = {gid: gid for gid in range(len(groups))}
    for key, s in stitched.items():
        units[s.a] = units[s.b] = key
    return units


def _identity(maps, shape, producer_shape) -> bool:
    A, b = maps
    n = len(shape)
    return (tuple(shape) == tuple(producer_shape) and A.shape == (n, n) and np.array_equal(A, np.eye(n, dtype=A.dtype))
            and not np.any(b))  # fmt: skip


def _out_shape(inst: bp.Inst, k: int) -> tuple:
    name = inst.probe.writes[k][0]
    return tuple(inst.op.result.type.shape if name == bp.RESULT else inst.op.operands[name].shape)


def _template(groups: list, stitched: dict, u: int) -> bp.Inst:
    s = stitched.get(u)
    return s.template if s is not None else groups[u].insts[0]


def _source(groups: list, stitched: dict, units: dict, u: int, name: str):
    """(producer unit, output) whose output gives operand ``name`` of unit ``u``, lane for lane and position for
    position; None when it comes from anywhere else (several sources, a shifted window, the pre-run value)."""
    s = stitched.get(u)
    lanes = len(groups[u].insts)
    if s is not None:
        d = s.direct[s.template.probe.reads.index(name)] if name in s.template.probe.reads else None
        if d is None:
            return None
        pair, k, maps = d
        producer = min(pair)
    else:
        parts = groups[u].reads.get(name) or []
        if len(parts) != 1 or parts[0].kind != "affine" or parts[0].box:
            return None
        producer, k, maps = parts[0].group, parts[0].k, parts[0].maps
        if units[producer] != producer or producer in stitched:  # (a stitched group's output is a cut)
            return None
    shape = (lanes, *_template(groups, stitched, u).read_access(name).shape)
    producer_shape = (len(groups[producer].insts), *_out_shape(_template(groups, stitched, producer), k))
    return (units[producer], k) if _identity(maps, shape, producer_shape) else None


def _plain_matmul(inst: bp.Inst, stitched_unit: bool) -> bool:
    op = inst.op
    if op.name not in MATMULS or op.attrs.get("perf_mode", "none") != "none" or op.attrs.get("is_transpose"):
        return False
    if op.attrs.get("tile_position") or op.result is None or op.result.type.dtype != "float32":
        return False
    if not all(isinstance(op.operands.get(n), Access) for n in CONTRACTED):
        return False
    return stitched_unit or inst.key[1] is None  # (a plain group's mask must hold everywhere: no box to cut to)


def _assign(inst: bp.Inst, accumulate: str, types) -> bool:
    op = inst.op
    return (op.name == "assign" and op.attrs.get("accumulate") == accumulate and not op.attrs.get("zero_first")
            and types(op.operands["dst"].tensor.name) == "float32")  # fmt: skip


def _same_writes(p: bp.Probe, q: bp.Probe) -> bool:
    """Do two assigns write the same outputs under the same masks?"""
    if [n for n, _ in p.writes] != [n for n, _ in q.writes]:
        return False
    return all((m1 is None) == (m2 is None) and (m1 is None or np.array_equal(m1, m2))
               for (_, m1), (_, m2) in zip(p.writes, q.writes))  # fmt: skip


def _joined_matmul(op: Op, k: int) -> Op:
    operands = dict(op.operands)
    for name in CONTRACTED:
        v = operands[name]
        operands[name] = Access(v.tensor, v.index, (k, *tuple(v.shape)[1:]))
    return Op(op.name, operands, op.attrs, op.result, op.loc)


def plan(groups: list, stitched: dict, types) -> dict:
    """``{add unit id: Join}`` for every accumulation over split contraction tiles the region holds (``types``:
    tensor name -> dtype name of its root)."""
    if not enabled():
        return {}
    units = unit_of(groups, stitched)
    joins = {}
    for u in sorted(set(units.values())):
        t_add = _template(groups, stitched, u)
        if not _assign(t_add, "add", types):
            continue
        src, dst = (_source(groups, stitched, units, u, n) for n in ("src", "dst"))
        if src is None or dst is None or src[1] != 0:
            continue
        mmb, (set_u, _) = src[0], dst
        t_set = _template(groups, stitched, set_u)
        if not _assign(t_set, "none", types):
            continue
        if not _same_writes(t_set.probe, t_add.probe):
            continue
        if (set_u in stitched) != (u in stitched):
            continue
        got = _source(groups, stitched, units, set_u, "src")
        if got is None or got[1] != 0:
            continue
        mma = got[0]
        t_a, t_b = _template(groups, stitched, mma), _template(groups, stitched, mmb)
        if mma == mmb or not (_plain_matmul(t_a, mma in stitched) and _plain_matmul(t_b, mmb in stitched)):
            continue
        if t_a.op.attrs != t_b.op.attrs or tuple(t_a.op.result.type.shape) != tuple(t_b.op.result.type.shape):
            continue
        sa, sb = (tuple(t.op.operands["stationary"].shape) for t in (t_a, t_b))
        ma, mb = (tuple(t.op.operands["moving"].shape) for t in (t_a, t_b))
        if sa[1:] != sb[1:] or ma[1:] != mb[1:] or sa[0] != ma[0] or sb[0] != mb[0]:
            continue
        if t_a.probe.reads != t_b.probe.reads or set(t_a.probe.reads) != set(CONTRACTED):
            continue
        probe = bp.Probe(t_a.probe.reads, ((bp.RESULT, None),))
        template = bp.Inst(_joined_matmul(t_a.op, sa[0] + sb[0]), -1, None, probe)
        joins[u] = Join(u, mma, mmb, template, sa[0])
    return joins


def _laid(a, b, axis_a, axis_b, lanes: int, transposed: bool):
    """Operand values of the two matmuls (stacked over lanes, or shared) laid end to end along the contraction
    (axis 0 of a lane's operand). ``transposed``: built as the transpose of the concatenation of the transposes
    (along the last axis): the lowering contracts the stationary operand through a transpose, which then cancels
    against ours, and a stationary that is itself a transpose (``nc_transpose``, the usual way to make one) cancels
    against the inner ones, so XLA sees the concatenation of what was transposed (slices of one array, which it
    folds into that array) and a dot of the same form as the split ones."""
    stacked = not (axis_a is None and axis_b is None)
    if stacked and axis_a is None:
        a = jnp.broadcast_to(a, (lanes, *a.shape))
    if stacked and axis_b is None:
        b = jnp.broadcast_to(b, (lanes, *b.shape))
    b = b.astype(a.dtype)
    k = 1 if stacked else 0
    if transposed:
        value = jnp.swapaxes(jnp.concatenate([jnp.swapaxes(a, k, -1), jnp.swapaxes(b, k, -1)], axis=-1), k, -1)
    else:
        value = jnp.concatenate([a, b], axis=k)
    return value, (0 if stacked else None)


def joined_inputs(j: Join, ran: dict, lanes: int):
    """The joined matmul's operands (and vmap axes) from the two matmul units' (``ran``: unit -> (template, values,
    axes))."""
    (t_a, va, xa), (_, vb, xb) = ran[j.mma], ran[j.mmb]
    values, axes = [], []
    for n, name in enumerate(t_a.probe.reads):
        value, axis = _laid(va[n], vb[n], xa[n], xb[n], lanes, name == "stationary")
        values.append(value)
        axes.append(axis)
    return values, axes


def add_inputs(t_add: bp.Inst, product, lanes: int):
    """``add``'s operands: the joined product as its source, zeros as the accumulator it adds to."""
    values, axes = [], []
    for name in t_add.probe.reads:
        if name == "src":
            values.append(product)
        else:
            shape = tuple(t_add.read_access(name).shape)
            values.append(jnp.zeros(shape, product.dtype))
            axes.append(None)
            continue
        axes.append(0)
    return values, axes
