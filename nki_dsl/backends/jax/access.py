"""Reading and writing an IR access (a view of a tensor) on JAX arrays.

An access whose index maps are a strided box (each tensor dimension indexed by at most one access axis with a
positive coefficient, each axis used once) and that provably stays inside its tensor becomes ``dynamic_slice`` /
``dynamic_update_slice`` with start offsets computed from loop indices and program ids. Anything else (an axis used
in two dimensions, negative strides, or a box that may leave the tensor, as the masked last tile of a ragged loop
does) becomes a gather or scatter with index arrays: reads clip indices into the tensor (the lanes that would leave
it are masked out by the op), writes drop the lanes that leave it or that the op's mask switches off.

``offsets`` shifts the tensor's dimensions: under a device mesh, a sharded tensor holds only the device's slice,
and global indices are translated to local ones by subtracting where that slice starts.
"""

from __future__ import annotations

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
    """What is static about an access: its split index, whether it is a box, and whether it stays in bounds."""

    split: tuple[tuple[dict[int, int], Affine], ...]
    box: bool
    in_bounds: bool
    shape: tuple[int, ...]
    tensor_shape: tuple[int, ...]


def plan(access: Access, ranges: dict[str, tuple[int, int]], index=None, tensor_shape=None) -> AccessPlan:
    """``ranges``: inclusive value ranges of the loop indices and program ids the access may use. ``index`` and
    ``tensor_shape`` replace the access's own when the tensor is held as a block of itself (``vectorise``)."""
    index = access.index if index is None else index
    parts = tuple(split(e) for e in index)
    shape = tuple(access.shape)
    tshape = tuple(access.tensor.type.shape if tensor_shape is None else tensor_shape)
    if len(parts) != len(tshape):
        raise NkiError(f"an access of {access.tensor.name} has {len(parts)} indices for {len(tshape)} dimensions")
    seen, box = set(), True
    for axes, _ in parts:
        if len(axes) > 1:
            box = False
        for a, c in axes.items():
            if c <= 0 or a in seen:
                box = False
            seen.add(a)
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
    return AccessPlan(parts, box, in_bounds, shape, tshape)


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
    sizes, strides, order = [], [], []
    for axes, _ in p.split:
        if not axes:
            sizes.append(1)
            strides.append(1)
            continue
        ((a, c),) = axes.items()
        sizes.append(c * (p.shape[a] - 1) + 1 if p.shape[a] else 0)
        strides.append(c)
        order.append(a)
    return sizes, strides, order


def _slice(array, starts, sizes):
    if all(isinstance(s, int) for s in starts):
        return array[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]
    return lax.dynamic_slice(array, _indices(starts), sizes, allow_negative_indices=False)


def _indices(starts):
    """Start indices for a window that provably stays inside its array: static ones stay Python ints (no index
    arithmetic staged), traced ones int32; neither gets the negative-index wrap-around lax would add."""
    return [s if isinstance(s, int) else jnp.asarray(s, jnp.int32) for s in starts]


def update(array, w, starts):
    # dynamic_update_slice even for static starts: ``array.at[slices].set`` lowers to a scatter, which XLA
    # compiles and runs far slower than an update of a window
    if w.shape == array.shape and all(isinstance(s, int) and s == 0 for s in starts):
        return w
    return lax.dynamic_update_slice(array, w, _indices(starts), allow_negative_indices=False)


def _read_box(array, p: AccessPlan, ivars, offsets):
    sizes, _, _ = _window(p)
    return from_window(_slice(array, _starts(p, ivars, offsets), sizes), p)


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
    w = w.reshape(tuple(p.shape[a] for a in order))  # drop the dimensions no axis indexes (size 1)
    if order != sorted(order):
        w = jnp.transpose(w, tuple(int(k) for k in np.argsort(order)))
    missing = tuple(a for a in range(len(p.shape)) if a not in order)
    if missing:
        w = jnp.broadcast_to(jnp.expand_dims(w, missing), p.shape)
    return w


def to_window(value, p: AccessPlan):
    """The window of a unit-stride box write holding ``value`` (of the access shape)."""
    sizes, _, order = _window(p)
    check_write(p)
    kept = value.reshape(tuple(p.shape[a] for a in range(len(p.shape)) if a in order))
    kept_axes = sorted(order)
    w = jnp.transpose(kept, tuple(kept_axes.index(a) for a in order)) if order != kept_axes else kept
    return w.reshape(tuple(sizes))


def check_write(p: AccessPlan) -> None:
    used = {a for axes, _ in p.split for a in axes}
    if any(p.shape[a] != 1 for a in range(len(p.shape)) if a not in used):
        # the verifier's shape rule refuses these; IR that skipped it gets an NkiError, not a wrong result
        raise NkiError("a write whose index ignores an axis writes one element several times")


def write(array, p: AccessPlan, value, ivars, offsets=None, mask=None):
    """``array`` with the access's elements replaced by ``value`` (of the access shape) where ``mask`` holds."""
    value = jnp.broadcast_to(jnp.asarray(value).astype(array.dtype), p.shape)
    check_write(p)
    if p.box and p.in_bounds and window(p)[1]:
        if mask is not None:  # a masked box that stays in bounds: keep the old elements, update the window
            value = jnp.where(jnp.broadcast_to(mask, p.shape), value, _read_box(array, p, ivars, offsets))
        return update(array, to_window(value, p), _starts(p, ivars, offsets))
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
