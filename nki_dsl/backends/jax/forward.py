"""Writes whose window is known at trace time are kept pending, not applied, and later reads of the elements they
wrote get the written values directly: a load -> compute -> store -> load chain through an SBUF or PSUM buffer
becomes plain dataflow XLA can fuse, and a buffer nobody reads as a whole is never built.

A tensor's value is then a ``Pending``: a ``base`` array and the windows written on top of it, oldest first. A read
of a static window takes it from the newest write that covers it, or from ``base`` when no pending write overlaps
it; anything else (a window that straddles writes, a traced index, a gather) applies the writes first
(``materialise``: a chain of ``dynamic_update_slice``). ``Pending`` is immutable: a loop body's state copies its
parent's dict of values and must not change the parent's.

Windows are clipped to the tensor. A read window that leaves the tensor is its clipped part padded with the edge
values, exactly the elements the clipped gather of ``access.read`` gives (they land on lanes the op's mask
discards); a write drops what leaves the tensor, as the scatter of ``access.write`` does.

Windows at traced starts (a ``lax.fori_loop`` body's: a loop index, or a re-rolled run's table offsets,
``reroll``) are kept pending too, keyed by their starts as affine expressions over the loop indices (``key``). A
read whose key is a pending write's, or lies inside it at a constant distance, gets the written elements; a
window provably disjoint from a write (``_relation``) skips it; anything else applies the writes first. A loop
body that writes a buffer and reads it back (a ring slot) is then dataflow plus one chain of in-place updates,
not updates and reads interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from nki_dsl.backends.jax import access as acc
from nki_dsl.ir.affine import Affine

MAX_PENDING = 50  # writes kept per tensor before the oldest is applied (bounds the search per read)


@dataclass(frozen=True)
class Pending:
    base: object  # a JAX array
    # ((starts, window value, key), ...), oldest first; windows inside the tensor. ``key`` is None for static
    # starts (Python ints), else the starts as Affine expressions (the starts themselves are traced then)
    writes: tuple = ()

    @property
    def shape(self):
        return self.base.shape

    @property
    def dtype(self):
        return self.base.dtype


def materialise(value):
    """The array ``value`` (an array or a Pending) stands for."""
    if not isinstance(value, Pending):
        return value
    if all(key is None for _, _, key in value.writes):
        tiled = _tile(value.writes, (0,) * len(value.shape), tuple(value.shape))
        if tiled is not None:
            return tiled
    array = value.base
    for starts, w, _ in value.writes:  # (acc.update takes static and traced starts alike)
        array = acc.update(array, w, list(starts))
    return array


def _tile(writes, starts, sizes):
    """The region (``starts``, ``sizes``) assembled by concatenation, when the pending writes inside it tile it
    exactly (every element written by one of them), else None: one concatenation instead of a chain of updates
    into an array whose old contents nothing reads (a kernel's output written tile by tile)."""
    inside = [(s, w, k) for s, w, k in writes if _contains(starts, sizes, s, w.shape)]
    if sum(int(np.prod(w.shape)) for _, w, _ in inside) != int(np.prod(sizes)):
        return None
    if len(inside) == 1:
        s, w, _ = inside[0]
        return w if tuple(s) == tuple(starts) and tuple(w.shape) == tuple(sizes) else None
    for dim in range(len(sizes)):  # a cut along ``dim`` that no write straddles
        cuts = sorted({s[dim] for s, _, _ in inside} | {s[dim] + w.shape[dim] for s, w, _ in inside})
        cuts = [c for c in cuts if starts[dim] < c < starts[dim] + sizes[dim]]
        cuts = [c for c in cuts if not any(s[dim] < c < s[dim] + w.shape[dim] for s, w, _ in inside)]
        if not cuts:
            continue
        edges = [starts[dim], *cuts, starts[dim] + sizes[dim]]
        pieces = []
        for lo, hi in zip(edges, edges[1:]):
            sub_starts = tuple(lo if k == dim else x for k, x in enumerate(starts))
            sub_sizes = tuple(hi - lo if k == dim else n for k, n in enumerate(sizes))
            piece = _tile(inside, sub_starts, sub_sizes)
            if piece is None:
                return None
            pieces.append(piece)
        return jnp.concatenate(pieces, axis=dim)
    return None


def _clip(starts, sizes, shape):
    """The part of the window inside the tensor: (its starts, its sizes, where it begins within the window), or
    None when the window misses the tensor."""
    lo = [max(s, 0) for s in starts]
    hi = [min(s + n, d) for s, n, d in zip(starts, sizes, shape)]
    if any(b <= a for a, b in zip(lo, hi)):
        return None
    return tuple(lo), tuple(b - a for a, b in zip(lo, hi)), tuple(a - s for a, s in zip(lo, starts))


def _contains(outer_starts, outer_sizes, starts, sizes) -> bool:
    return all(o <= s and s + n <= o + m for o, m, s, n in zip(outer_starts, outer_sizes, starts, sizes))


def _slice(array, starts, sizes):
    return array[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


def read_window(value, starts, sizes, ranges=None):
    """The elements of the window (``starts``, ``sizes``: Python ints) of tensor ``value``, and ``value`` itself
    (materialised when the read needed that, so later reads need not do it again). ``ranges``: the index
    variables' value ranges, which decide whether windows at traced starts overlap this one."""
    clipped = _clip(starts, sizes, value.shape)
    if clipped is None:  # nothing of the window is inside the tensor: every lane is masked off
        array = materialise(value)
        edge = _slice(array, [min(max(s, 0), d - 1) for s, d in zip(starts, array.shape)], [1] * array.ndim)
        return jnp.broadcast_to(edge, tuple(sizes)), array
    cs, csz, offset = clipped
    w, value = _read_clipped(value, cs, csz, ranges)
    if tuple(csz) != tuple(sizes):
        pads = [(o, n - o - c) for o, n, c in zip(offset, sizes, csz)]
        w = jnp.pad(w, pads, mode="edge")
    return w, value


def _relation(key_w, sizes_w, key_r, sizes_r, ranges):
    """How window r (starts ``key_r``, Affine per dimension) lies against window w: ``"disjoint"``, the offsets of
    r inside w (a tuple of ints, when r provably lies inside w at a constant distance) or ``"overlap"`` (maybe).

    ``ranges(expr)`` gives an index expression's least and largest value, or, for one made of a re-rolled run's
    table variables only, its value in each iteration (a tuple of (value, value) pairs): windows are then compared
    iteration by iteration (ring slots ``n % 3`` and ``(n + 1) % 3`` differ by 1 or -2, never 0)."""
    diffs = [er - ew for ew, er in zip(key_w, key_r)]  # where r starts relative to w, per dimension
    if all(d.is_const for d in diffs):
        per = [[(d.const, d.const)] for d in diffs]
    elif ranges is None:
        return "overlap"
    else:
        try:
            per = [[(d.const, d.const)] if d.is_const else ranges(d) for d in diffs]
        except KeyError:
            return "overlap"
    steps = max(len(p) for p in per)
    inside = [lo if lo == hi and len(p) == 1 else None for p in per for lo, hi in p[:1]]
    for j in range(steps):
        apart = False
        for p, nw, nr in zip(per, sizes_w, sizes_r):
            lo, hi = p[j] if len(p) > 1 else p[0]
            apart = apart or hi + nr <= 0 or lo >= nw
        if not apart:
            break
    else:
        return "disjoint"
    ok = all(o is not None and o >= 0 and o + nr <= nw for o, nw, nr in zip(inside, sizes_w, sizes_r))
    return tuple(inside) if ok else "overlap"


def _static_key(starts):
    return tuple(Affine((), int(s)) for s in starts)


def _find(value, key, sizes, ranges):
    """The newest pending write the window (``key``, ``sizes``) can be read from: (write, offsets inside it), None
    when no pending write touches it (read the base), or "overlap" (apply the writes first)."""
    for entry in reversed(value.writes):
        ws, w, wkey = entry
        rel = _relation(_static_key(ws) if wkey is None else wkey, w.shape, key, sizes, ranges)
        if rel == "disjoint":
            continue
        return "overlap" if rel == "overlap" else (entry, rel)
    return None


def _read_clipped(value, starts, sizes, ranges=None):
    if isinstance(value, Pending):
        found = _find(value, _static_key(starts), sizes, ranges)
        if found is None:
            return _slice(value.base, starts, sizes), value
        if found != "overlap":
            (_, w, _), offsets = found
            return _slice(w, offsets, sizes), value
        value = materialise(value)
    return _slice(value, starts, sizes), value


def read_traced(value, key, starts, sizes, ranges):
    """The window at traced ``starts`` (``key``: them as Affine expressions) of tensor ``value`` (inside it), and
    ``value`` itself (materialised when the read needed that)."""
    if isinstance(value, Pending):
        found = _find(value, key, sizes, ranges)
        if found is None:
            return acc.slice_window(value.base, starts, sizes), value
        if found != "overlap":
            (_, w, _), offsets = found
            return _slice(w, offsets, sizes), value
        value = materialise(value)
    return acc.slice_window(value, starts, sizes), value


def write_traced(value, key, starts, w, ranges):
    """Tensor ``value`` with the window at traced ``starts`` (inside it; ``key``: them as Affine) set to ``w``."""
    base, writes = (value.base, value.writes) if isinstance(value, Pending) else (value, ())
    covered = []
    for entry in writes:  # older writes this one covers entirely are dropped
        ws, old, wkey = entry
        rel = _relation(key, w.shape, _static_key(ws) if wkey is None else wkey, old.shape, ranges)
        covered.append(isinstance(rel, tuple))
    writes = tuple(e for e, c in zip(writes, covered) if not c) + ((tuple(starts), w, tuple(key)),)
    if len(writes) > MAX_PENDING:
        base = materialise(Pending(base, writes[:1]))
        writes = writes[1:]
    return Pending(base, writes)


def write_window(value, starts, w):
    """Tensor ``value`` with the window at ``starts`` (Python ints, possibly leaving the tensor) set to ``w``."""
    clipped = _clip(starts, w.shape, value.shape)
    if clipped is None:
        return value
    cs, csz, offset = clipped
    if tuple(csz) != tuple(w.shape):
        w = _slice(w, offset, csz)
    base, writes = (value.base, value.writes) if isinstance(value, Pending) else (value, ())
    if tuple(csz) == tuple(base.shape):  # the whole tensor: nothing before it matters
        return w
    writes = tuple(x for x in writes if x[2] is not None or not _contains(cs, csz, x[0], x[1].shape))
    writes += ((cs, w, None),)
    if len(writes) > MAX_PENDING:
        base = materialise(Pending(base, writes[:1]))
        writes = writes[1:]
    return Pending(base, writes)
