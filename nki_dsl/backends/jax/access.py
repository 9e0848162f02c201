"""Reading and writing an IR access (a view of a tensor) on JAX arrays.

An access whose index maps are a strided box and that provably stays inside its tensor becomes ``dynamic_slice`` /
``dynamic_update_slice`` with start offsets computed from loop indices and program ids. A strided box: each axis
(of extent > 1) is used in one tensor dimension only, and the axes a dimension uses form a *chain*, ordered outer
to inner, whose coefficients are those of a row-major layout with a positive stride ``s`` on the innermost:
``s * (n2 * n3 * x1 + n3 * x2 + x3)`` for extents ``n1, n2, n3``. Such a dimension is one merged axis of extent
``n1 * n2 * n3`` and stride ``s``: its window is a slice of ``s * (n1 * n2 * n3 - 1) + 1`` elements, taken every
``s``, reshaped to ``(n1, n2, n3)`` (a 3-D view of a 2-D tile, ``t[p, g * d + c]``, is a slice and a reshape, not a
gather). Axes of extent 1 index nothing (their value is 0), whatever their coefficient. Anything else (an axis
used in two dimensions, negative strides, coefficients that skip or overlap elements, or a box that may leave
the tensor, as the masked last tile of a ragged loop does) becomes a gather or scatter with index arrays: reads
clip indices into the tensor (the lanes that would leave it are masked out by the op), writes drop the lanes that
leave it or that the op's mask switches off.

``offsets`` shifts the tensor's dimensions: under a device mesh, a sharded tensor holds only the device's slice,
and global indices are translated to local ones by subtracting where that slice starts.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl.errors import NkiError
from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.nodes import Access


def _is_axis(v: str) -> bool:
    try:
        return var_kind(v) == "axis"
    except ValueError:
        return False


def split(e: Affine) -> tuple[dict[int, int], Affine]:
    """Axis coefficients ``{axis: coef}`` and the rest (loop indices, program ids, constant)."""
    axes = {var_number(v): c for v, c in e.terms if _is_axis(v)}
    rest = Affine(tuple((v, c) for v, c in e.terms if not _is_axis(v)), e.const)
    return axes, rest


def value_of(e: Affine, ivars: dict):
    """An affine expression without axes: a Python int when every variable is static, else a traced int32."""
    v = e.const
    for name, c in e.terms:
        if name not in ivars:
            raise NkiError(f"index variable {name} is not bound by an enclosing loop or the launch grid")
        v = v + c * ivars[name]
    return v


def axis_values(coefs: dict[int, int], shape: tuple[int, ...]):
    """``sum_a c * iota(a)`` over the access axes, broadcastable to ``shape`` (int32)."""
    total = None
    for a, c in coefs.items():
        view = [1] * len(shape)
        view[a] = shape[a]
        term = c * lax.broadcasted_iota(jnp.int32, tuple(view), a)
        total = term if total is None else total + term
    return total


def axis_values_np(coefs: dict[int, int], shape: tuple[int, ...]) -> np.ndarray:
    """``axis_values`` computed in NumPy (for masks known at trace time)."""
    total = np.zeros((1,) * len(shape), np.int32)
    for a, c in coefs.items():
        view = [1] * len(shape)
        view[a] = shape[a]
        total = total + c * np.arange(shape[a], dtype=np.int32).reshape(view)
    return total


@dataclass(frozen=True)
class AccessPlan:
    """What is static about an access: its split index, whether it is a box, and whether it stays in bounds.
    For a box, per tensor dimension: ``chains`` the axes indexing it, outer to inner, ``strides`` the coefficient
    of the innermost (1 for a dimension no axis indexes) and ``sizes`` the window's extent; ``order`` lists the
    chains' axes one after the other (the axes in the order the window holds them once reshaped)."""

    split: tuple[tuple[dict[int, int], Affine], ...]
    box: bool
    in_bounds: bool
    shape: tuple[int, ...]
    tensor_shape: tuple[int, ...]
    chains: tuple[tuple[int, ...], ...] = ()
    strides: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()
    order: tuple[int, ...] = ()


def _chain(axes: dict[int, int], shape: tuple[int, ...]):
    """The axes of one tensor dimension ordered outer to inner and the innermost's coefficient, when their
    coefficients are a row-major layout of positive stride (see the module docstring), else None. Axes of extent 1
    are left out: they always index 0."""
    used = [(c, a) for a, c in axes.items() if shape[a] != 1]
    if len(used) == 1:
        ((c, a),) = used
        return ((a,), c) if c > 0 else None
    if not used:
        return (), 1
    used.sort(key=lambda ca: (-ca[0], ca[1]))
    for (c_out, _), (c_in, a_in) in zip(used, used[1:]):
        if c_in <= 0 or c_out != c_in * shape[a_in]:
            return None
    return tuple(a for _, a in used), used[-1][0]


def plan(access: Access, ranges: dict[str, tuple[int, int]], index=None, tensor_shape=None) -> AccessPlan:
    """``ranges``: inclusive value ranges of the loop indices and program ids the access may use. ``index`` and
    ``tensor_shape`` replace the access's own when the tensor is held as a block of itself (``vectorise``)."""
    index = access.index if index is None else index
    parts = tuple(split(e) for e in index)
    shape = tuple(access.shape)
    tshape = tuple(access.tensor.type.shape if tensor_shape is None else tensor_shape)
    if len(parts) != len(tshape):
        raise NkiError(f"an access of {access.tensor.name} has {len(parts)} indices for {len(tshape)} dimensions")
    seen, box, chains, strides = set(), True, [], []
    for axes, _ in parts:
        chain = _chain(axes, shape)
        if chain is None or seen.intersection(chain[0]):
            box = False
            break
        seen.update(chain[0])
        chains.append(chain[0])
        strides.append(chain[1])
    in_bounds = True
    env = dict(ranges)
    env.update({f"d{k}": (0, max(n - 1, 0)) for k, n in enumerate(shape)})
    for e, n in zip(index, tshape):
        try:
            lo, hi = e.bounds(env)
        except KeyError:
            in_bounds = False
            break
        if lo < 0 or hi >= n:
            in_bounds = False
    if not box:
        return AccessPlan(parts, box, in_bounds, shape, tshape)
    sizes = []
    for chain, c in zip(chains, strides):
        n = math.prod(shape[a] for a in chain)
        sizes.append(c * (n - 1) + 1 if n else 0)
    order = tuple(a for chain in chains for a in chain)
    return AccessPlan(parts, box, in_bounds, shape, tshape, tuple(chains), tuple(strides), tuple(sizes), order)


def _starts(p: AccessPlan, ivars, offsets):
    starts = []
    for k, (_, rest) in enumerate(p.split):
        s = value_of(rest, ivars)
        if offsets is not None and offsets[k] is not None:
            s = s - offsets[k]
        starts.append(s)
    return starts


def _index_arrays(p: AccessPlan, ivars, offsets):
    """Per tensor dimension, an int32 index array broadcast to the access shape."""
    out = []
    for (axes, _), s in zip(p.split, _starts(p, ivars, offsets)):
        idx = axis_values(axes, p.shape)
        idx = jnp.asarray(s, jnp.int32) if idx is None else idx + jnp.asarray(s, jnp.int32)
        out.append(jnp.broadcast_to(idx, p.shape))
    return out


def read(array, p: AccessPlan, ivars, offsets=None):
    """The access's elements, an array of the access shape (in ``array``'s dtype)."""
    if p.box and p.in_bounds:
        return _read_box(array, p, ivars, offsets)
    idx = _index_arrays(p, ivars, offsets)
    idx = [jnp.clip(i, 0, n - 1) for i, n in zip(idx, array.shape)]
    if not idx:
        return jnp.broadcast_to(array, p.shape)
    return array.at[tuple(idx)].get(mode="promise_in_bounds")


def _window(p: AccessPlan):
    return list(p.sizes), list(p.strides), list(p.order)


def _slice(array, starts, sizes):
    if all(isinstance(s, int) for s in starts):
        return array[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]
    return lax.dynamic_slice(array, _indices(starts), sizes, allow_negative_indices=False)


def slice_window(array, starts, sizes):
    """The window of ``sizes`` at ``starts`` (Python ints or traced int32), which provably stays inside ``array``."""
    return _slice(array, starts, sizes)


def _indices(starts):
    """Start indices for a window that provably stays inside its array: static ones stay Python ints (no index
    arithmetic staged), traced ones int32; neither gets the negative-index wrap-around lax would add."""
    return [s if isinstance(s, int) else jnp.asarray(s, jnp.int32) for s in starts]


_batched = [0]  # how many ``jax.vmap`` bodies (vectorised loops) are being traced right now


@contextmanager
def batched():
    """Around the tracing of a vectorised loop's body: see ``update``."""
    _batched[0] += 1
    try:
        yield
    finally:
        _batched[0] -= 1


def update(array, w, starts):
    # dynamic_update_slice even for static starts: ``array.at[slices].set`` lowers to a scatter, which XLA
    # compiles and runs far slower than an update of a window
    if w.shape == array.shape and all(isinstance(s, int) and s == 0 for s in starts):
        return w
    if _batched[0] and all(isinstance(s, int) for s in starts):
        # Under vmap, dynamic_update_slice is batched into a scatter (jax's rule for it, whatever the starts);
        # a window at static starts is the window padded to the array's shape and selected by a constant mask.
        pads = [(s, n - s - m, 0) for s, n, m in zip(starts, array.shape, w.shape)]
        inside = True
        for k, (s, n, m) in enumerate(zip(starts, array.shape, w.shape)):
            if m != n:  # one small constant per cut dimension, not one of the array's size
                along = np.zeros([n if j == k else 1 for j in range(array.ndim)], bool)
                along[(slice(None),) * k + (slice(s, s + m),)] = True
                inside = inside & jnp.asarray(along)
        return jnp.where(inside, lax.pad(w, jnp.zeros((), w.dtype), pads), array)
    return lax.dynamic_update_slice(array, w, _indices(starts), allow_negative_indices=False)


def _read_box(array, p: AccessPlan, ivars, offsets):
    sizes, _, _ = _window(p)
    return from_window(_slice(array, _starts(p, ivars, offsets), sizes), p)


def starts(p: AccessPlan, ivars) -> list:
    """Where a box access's window starts in each tensor dimension: Python ints or traced int32 values."""
    return [s if isinstance(s, int) else jnp.asarray(s, jnp.int32) for s in _starts(p, ivars, None)]


def static_starts(p: AccessPlan, ivars, offsets=None):
    """Where a box access's window starts in each tensor dimension, when that is known at trace time (no traced
    loop index or program id in it), else None."""
    if not p.box:
        return None
    starts = _starts(p, ivars, offsets)
    return starts if all(isinstance(s, int) for s in starts) else None


def window(p: AccessPlan):
    """A box access's window: its size in each tensor dimension and whether every stride is 1."""
    sizes, strides, _ = _window(p)
    return tuple(sizes), all(c == 1 for c in strides)


def from_window(w, p: AccessPlan):
    """The access's elements (of its shape) from its window ``w`` (the tensor elements it spans)."""
    _, strides, order = _window(p)
    if any(c != 1 for c in strides):
        w = w[tuple(slice(None, None, c) for c in strides)]
    # split each merged dimension into its chain's axes, drop the dimensions no axis indexes (size 1)
    w = w.reshape(tuple(p.shape[a] for a in order))
    if order != sorted(order):
        w = jnp.transpose(w, tuple(int(k) for k in np.argsort(order)))
    missing = tuple(a for a in range(len(p.shape)) if a not in order)
    if missing:
        w = jnp.broadcast_to(jnp.expand_dims(w, missing), p.shape)
    return w


def to_window(value, p: AccessPlan, old=None):
    """The window of a box write holding ``value`` (of the access shape). A strided box writes every ``s``-th
    element of its window only: ``old``, the window's elements before the write, fills the lanes between (an
    interleave by padding and a select, where ``.at[::s].set`` would be a scatter)."""
    sizes, strides, order = _window(p)
    check_write(p)
    kept = value.reshape(tuple(p.shape[a] for a in range(len(p.shape)) if a in order))
    kept_axes = sorted(order)
    w = jnp.transpose(kept, tuple(kept_axes.index(a) for a in order)) if order != kept_axes else kept
    if all(c == 1 for c in strides):
        return w.reshape(tuple(sizes))  # (a chain's axes merge into its dimension)
    if old is None:
        raise NkiError("internal: a strided window write needs the window's old elements")
    w = w.reshape(tuple((n + c - 1) // c for n, c in zip(sizes, strides)))  # one dimension per tensor dimension
    spread = lax.pad(w, jnp.zeros((), w.dtype), [(0, 0, c - 1) for c in strides])
    hit = np.ones((1,) * len(sizes), bool)
    for k, (n, c) in enumerate(zip(sizes, strides)):
        view = [1] * len(sizes)
        view[k] = n
        hit = hit & (np.arange(n) % c == 0).reshape(view)
    return jnp.where(hit, spread, old)


def check_write(p: AccessPlan) -> None:
    used = {a for axes, _ in p.split for a in axes}
    if any(p.shape[a] != 1 for a in range(len(p.shape)) if a not in used):
        # the verifier's shape rule refuses these; IR that skipped it gets an NkiError, not a wrong result
        raise NkiError("a write whose index ignores an axis writes one element several times")


def write(array, p: AccessPlan, value, ivars, offsets=None, mask=None):
    """``array`` with the access's elements replaced by ``value`` (of the access shape) where ``mask`` holds."""
    value = jnp.broadcast_to(jnp.asarray(value).astype(array.dtype), p.shape)
    check_write(p)
    if p.box and p.in_bounds:
        starts = _starts(p, ivars, offsets)
        old = None if window(p)[1] else _slice(array, starts, _window(p)[0])
        if mask is not None:  # a masked box that stays in bounds: keep the old elements, update the window
            kept = _read_box(array, p, ivars, offsets) if old is None else from_window(old, p)
            value = jnp.where(jnp.broadcast_to(mask, p.shape), value, kept)
        return update(array, to_window(value, p, old), starts)
    if not p.split:
        return jnp.where(mask, value, array) if mask is not None else value.reshape(array.shape)
    idx = _index_arrays(p, ivars, offsets)
    keep = None
    for i, n in zip(idx, array.shape):
        ok = (i >= 0) & (i < n)
        keep = ok if keep is None else keep & ok
    if mask is not None:
        keep = keep & jnp.broadcast_to(mask, p.shape)
    # Lanes that leave the tensor or that the mask switches off get an index past the end: the scatter drops them.
    idx[0] = jnp.where(keep, idx[0], array.shape[0])
    return array.at[tuple(idx)].set(value, mode="drop")
