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
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from nki_dsl.backends.jax import access as acc

MAX_PENDING = 50  # writes kept per tensor before the oldest is applied (bounds the search per read)


@dataclass(frozen=True)
class Pending:
    base: object  # a JAX array
    writes: tuple = ()  # ((starts, window value), ...), oldest first; windows inside the tensor

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
    tiled = _tile(value.writes, (0,) * len(value.shape), tuple(value.shape))
    if tiled is not None:
        return tiled
    array = value.base
    for starts, w in value.writes:
        array = acc.update(array, w, list(starts))
    return array


def _tile(writes, starts, sizes):
    """The region (``starts``, ``sizes``) assembled by concatenation, when the pending writes inside it tile it
    exactly (every element written by one of them), else None: one concatenation instead of a chain of updates
    into an array whose old contents nothing reads (a kernel's output written tile by tile)."""
    inside = [(s, w) for s, w in writes if _contains(starts, sizes, s, w.shape)]
    if sum(int(np.prod(w.shape)) for _, w in inside) != int(np.prod(sizes)):
        return None
    if len(inside) == 1:
        s, w = inside[0]
        return w if tuple(s) == tuple(starts) and tuple(w.shape) == tuple(sizes) else None
    for dim in range(len(sizes)):  # a cut along ``dim`` that no write straddles
        cuts = sorted({s[dim] for s, _ in inside} | {s[dim] + w.shape[dim] for s, w in inside})
        cuts = [c for c in cuts if starts[dim] < c < starts[dim] + sizes[dim]]
        cuts = [c for c in cuts if not any(s[dim] < c < s[dim] + w.shape[dim] for s, w in inside)]
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


def _overlap(a_starts, a_sizes, b_starts, b_sizes) -> bool:
    return all(a < b + m and b < a + n for a, n, b, m in zip(a_starts, a_sizes, b_starts, b_sizes))


def _contains(outer_starts, outer_sizes, starts, sizes) -> bool:
    return all(o <= s and s + n <= o + m for o, m, s, n in zip(outer_starts, outer_sizes, starts, sizes))


def _slice(array, starts, sizes):
    return array[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]


def read_window(value, starts, sizes):
    """The elements of the window (``starts``, ``sizes``: Python ints) of tensor ``value``, and ``value`` itself
    (materialised when the read needed that, so later reads need not do it again)."""
    clipped = _clip(starts, sizes, value.shape)
    if clipped is None:  # nothing of the window is inside the tensor: every lane is masked off
        array = materialise(value)
        edge = _slice(array, [min(max(s, 0), d - 1) for s, d in zip(starts, array.shape)], [1] * array.ndim)
        return jnp.broadcast_to(edge, tuple(sizes)), array
    cs, csz, offset = clipped
    w, value = _read_clipped(value, cs, csz)
    if tuple(csz) != tuple(sizes):
        pads = [(o, n - o - c) for o, n, c in zip(offset, sizes, csz)]
        w = jnp.pad(w, pads, mode="edge")
    return w, value


def _read_clipped(value, starts, sizes):
    if isinstance(value, Pending):
        for ws, w in reversed(value.writes):
            wsz = w.shape
            if not _overlap(ws, wsz, starts, sizes):
                continue
            if _contains(ws, wsz, starts, sizes):
                return _slice(w, [s - o for s, o in zip(starts, ws)], sizes), value
            break  # a newer write covers part of the window only: apply them all
        else:
            return _slice(value.base, starts, sizes), value
        value = materialise(value)
    return _slice(value, starts, sizes), value


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
    writes = tuple(x for x in writes if not _contains(cs, csz, x[0], x[1].shape)) + ((cs, w),)
    if len(writes) > MAX_PENDING:
        base = materialise(Pending(base, writes[:1]))
        writes = writes[1:]
    return Pending(base, writes)
