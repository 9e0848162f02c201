"""Loops whose iterations provably touch disjoint blocks of every tensor they write run as one batched computation
(``jax.vmap`` over the iteration) instead of a ``lax.fori_loop``: XLA then sees whole-array ops it can fuse, not a
loop of small dynamic slices.

A tensor is *blocked* by loop ``v = start + step * i`` (``i < trips``) when every access of it inside the loop
indexes exactly one dimension ``k`` with ``c * v`` (the same ``k`` and ``c > 0`` for all of them), no other
dimension uses ``v``, and what remains of the index in dimension ``k`` lies, over all values of the other variables
and axes, in one window ``[base, base + B)`` with ``B = c * step``: iteration ``i`` then touches only elements
``base + B * i ... base + B * (i + 1) - 1`` of that dimension. The loop runs vectorised when every tensor it writes
and that outlives an iteration (exists before it or is read after it) is blocked, it draws no random numbers (the
generator is sequential state), prints nothing (``nl.device_print`` prints iteration by iteration) and it touches no
tensor through a reshape view of a blocked one. Iterations then
cannot see each other's writes, whatever the loop's kind, so running them at once gives the loop's results.

Each blocked tensor enters as ``trips`` blocks (a reshape of its dimension ``k``, padded with its edge values where
the blocks reach outside it: those lanes are the ones a ragged last tile's mask discards, and edge values are what
the clipped reads of the loop form gave them); written ones are reassembled from the blocks afterwards. Tensors
the loop only reads and does not block are passed unchanged (an access that uses ``v`` some other way is gathered
by vmap's own batching rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from jax import lax

from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax.analysis import RNG
from nki_dsl.backends.jax.context import State, View
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.nodes import Access, Loop
from nki_dsl.ir.ops import OPS


@dataclass(frozen=True)
class Block:
    """Tensor ``root`` cut along ``dim`` into ``trips`` blocks of ``size`` starting at ``base`` (which may lie
    outside the tensor: ``pad_lo`` / ``pad_hi`` elements are added there)."""

    root: str
    dim: int
    coef: int
    size: int
    base: int
    pad_lo: int
    pad_hi: int


def _accesses(stmts):
    """(op, access, written?) for every access of every op under ``stmts``, and the ops' results."""
    out, results = [], []
    for stmt in stmts:
        if isinstance(stmt, Loop):
            sub, res = _accesses(stmt.body)
            out += sub
            results += res
            continue
        spec = OPS.get(stmt.name)
        writes = {o.name for o in spec.writes} if spec is not None else set()
        for name, v in stmt.operands.items():
            if isinstance(v, Access):
                out.append((stmt, v, name in writes))
        if stmt.result is not None:
            results.append(stmt)
    return out, results


def _prints(stmts) -> bool:
    for stmt in stmts:
        if isinstance(stmt, Loop):
            if _prints(stmt.body):
                return True
        elif OPS.get(stmt.name) is not None and OPS[stmt.name].family == "print":
            return True
    return False


def _ranges(st: State, access: Access) -> dict:
    env = dict(st.info.ranges)
    env.update({f"d{k}": (0, max(n - 1, 0)) for k, n in enumerate(access.shape)})
    return env


def plan(stmts, var: str, start: int, step: int, trips: int, st: State, written: set, carried: list):
    """The blocks of a vectorised run of the loop, or None when its iterations may not be independent."""
    if RNG in written or step <= 0:
        return None
    accesses, results = _accesses(stmts)
    if _prints(stmts):  # nl.device_print prints iteration by iteration, in program order
        return None
    defined = {st.info.root(op.result.name) for op in results if op.name not in VIEW_OPS}
    if any(root in carried for root in defined):
        return None  # a tensor defined whole by an op in the loop and used after it: the last iteration's value
    per_root: dict[str, list] = {}
    through_view: set = set()
    for _op, access, _w in accesses:
        name = access.tensor.name
        root = st.info.root(name)
        if root != name:
            through_view.add(root)
        index = st.index(access)
        hits = [(k, e.coef(var)) for k, e in enumerate(index) if e.coef(var)]
        if not hits:
            per_root.setdefault(root, []).append(None)
            continue
        if len(hits) != 1 or hits[0][1] <= 0:
            per_root.setdefault(root, []).append(False)
            continue
        k, c = hits[0]
        rest = index[k] - Affine.var(var, c) + c * start
        try:
            lo, hi = rest.bounds(_ranges(st, access))
        except KeyError:
            per_root.setdefault(root, []).append(False)
            continue
        per_root.setdefault(root, []).append((k, c, lo, hi))
    blocks = {}
    for root, uses in per_root.items():
        if root in defined:  # made afresh by every iteration: vmap batches it as it is
            continue
        block = _block(root, uses, step, trips, st) if root not in through_view else None
        if root in carried and block is None:
            return None
        if root in st.offsets:  # a device's shard under a mesh: keep the plain loop
            if root in carried:
                return None
            continue
        if block is not None:
            blocks[root] = block
    if any(root not in per_root for root in carried):
        return None
    return blocks


def _block(root: str, uses: list, step: int, trips: int, st: State) -> Block | None:
    if not uses or any(u is None or u is False for u in uses):
        return None
    dims = {(k, c) for k, c, _, _ in uses}
    if len(dims) != 1:
        return None
    ((k, c),) = dims
    size = c * step
    base = min(lo for _, _, lo, _ in uses)
    if max(hi for _, _, _, hi in uses) >= base + size:
        return None
    n = _shape(st, root)[k]
    return Block(root, k, c, size, base, max(0, -base), max(0, base + trips * size - n))


def _shape(st: State, root: str) -> tuple[int, ...]:
    view = st.views.get(root)
    if view is not None:
        return view.shape
    shape = st.local_shapes.get(root)
    return tuple(shape) if shape is not None else tuple(st.info.types[root].shape)


def _to_blocks(value, b: Block, trips: int):
    """``value`` (the tensor as held) as ``trips`` blocks along a new axis at ``b.dim``."""
    if b.pad_lo or b.pad_hi:
        widths = [(0, 0)] * value.ndim
        widths[b.dim] = (b.pad_lo, b.pad_hi)
        value = jnp.pad(value, widths, mode="edge")
    first = b.base + b.pad_lo
    value = lax.slice_in_dim(value, first, first + trips * b.size, axis=b.dim)
    return value.reshape(value.shape[: b.dim] + (trips, b.size) + value.shape[b.dim + 1:])


def _from_blocks(parts, old, b: Block):
    """The tensor ``old`` with the region the blocks ``parts`` cover replaced by them."""
    merged = parts.reshape(parts.shape[: b.dim] + (-1,) + parts.shape[b.dim + 2:])
    n = old.shape[b.dim]
    lo, hi = max(b.base, 0), min(b.base + merged.shape[b.dim], n)
    part = lax.slice_in_dim(merged, lo - b.base, hi - b.base, axis=b.dim)
    if part.shape == old.shape:
        return part
    starts = [0] * old.ndim
    starts[b.dim] = lo
    return lax.dynamic_update_slice(old, part, starts)


def run(blocks: dict, var, start, step, trips, carried: list, body, st: State) -> None:
    """The loop's iterations at once: ``st.env`` gets the carried tensors' values after the loop."""
    roots = sorted(blocks, key=repr)
    held = [st.value(r) if r in st.env else st.fresh(r) for r in roots]
    inputs = [_to_blocks(v, blocks[r], trips) for r, v in zip(roots, held)]
    out_roots = [r for r in roots if r in carried]

    def one(i, *parts):
        inner = st.child()
        inner.ivars[var] = start + step * i
        for r, part in zip(roots, parts):
            b = blocks[r]
            inner.env[r] = part
            view = st.views.get(r)
            adjust = view.adjust if view is not None else tuple(Affine() for _ in part.shape)
            shift = Affine.var(var, -b.coef) + (b.coef * start - b.base)
            adjust = tuple(a + shift if k == b.dim else a for k, a in enumerate(adjust))
            inner.views[r] = View(tuple(part.shape), adjust)
        with acc.batched():
            body(inner)
            return tuple(inner.array(r) for r in out_roots)

    in_axes = (0, *(blocks[r].dim for r in roots))
    out_axes = tuple(blocks[r].dim for r in out_roots)
    outs = jax.vmap(one, in_axes=in_axes, out_axes=out_axes, axis_size=trips)(jnp.arange(trips, dtype=jnp.int32),
                                                                              *inputs)  # fmt: skip
    for r, value in zip(out_roots, outs):
        st.env[r] = _from_blocks(value, held[roots.index(r)], blocks[r])
