"""The numerics rules of the JAX backend: how values are held, rounded and poisoned (the same rules as the NumPy
reference, which is the specification).

* On-chip float tiles are float32 arrays whose values are already rounded to the tile's dtype: engines compute in
  fp32 (reference/nki.md §2.3) and a result is rounded, to nearest even, when it is written. Integer and bool tiles
  keep their own type.
* HBM tensors are held in their storage dtype (bfloat16 stays bfloat16); a float store rounds once, from fp32.
* Float -> integer conversion rounds to nearest even and saturates; NaN converts to 0 (nki.md §2.6).
* Fresh memory reads as NaN (floats), True (bool) or the most negative integer, never zeros, so a kernel that reads
  memory nobody wrote shows it. The gradient twin of a kernel (``program.build``) fills floats with 0 instead:
  derivatives of masked-out lanes are multiplied by zero cotangents, and 0 * NaN would be NaN.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from nki_dsl import dtypes

F32 = jnp.float32


def storage_dtype(name: str) -> np.dtype:
    """The dtype an HBM tensor of ``name`` is held in."""
    return dtypes.get(name).np_dtype


def compute_dtype(name: str) -> np.dtype:
    """The dtype an on-chip tile of ``name`` is held in (fp32 for every float dtype)."""
    return dtypes.compute_dtype(name)


def round_to(value, name: str):
    """``value`` as an on-chip tile of dtype ``name`` holds it."""
    d = dtypes.get(name)
    x = jnp.asarray(value)
    if d.is_float:
        x = x.astype(F32)
        if d.np_dtype != np.dtype(np.float32):
            x = x.astype(d.np_dtype).astype(F32)
        return x
    if d.kind == "bool":
        return x != 0
    if jnp.issubdtype(x.dtype, jnp.floating):
        info = np.iinfo(d.np_dtype)
        # Saturate in fp32 before the cast: int32's max is not an fp32 (it rounds up to 2**31), so the upper clip
        # bound is the largest fp32 below it, and anything above converts to int32 max through the clip below.
        lo, hi = float(info.min), float(info.max)
        r = jnp.where(jnp.isnan(x), 0.0, jnp.rint(x.astype(F32)))
        if d.itemsize >= 4:
            big = r >= np.float32(hi)
            small = r <= np.float32(lo)
            r = jnp.clip(r, np.nextafter(np.float32(lo), np.float32(0)), np.nextafter(np.float32(hi), np.float32(0)))
            out = r.astype(d.np_dtype)
            out = jnp.where(big, jnp.asarray(info.max, d.np_dtype), out)
            return jnp.where(small, jnp.asarray(info.min, d.np_dtype), out)
        return jnp.clip(r, lo, hi).astype(d.np_dtype)
    return x.astype(d.np_dtype)


def to_hbm(value, name: str):
    """On-chip values converted for storing into an HBM tensor of dtype ``name`` (rounding once, from fp32)."""
    d = dtypes.get(name)
    if d.is_float:
        return jnp.asarray(value).astype(F32).astype(d.np_dtype)
    return round_to(value, name)


def poison(name: str, zero: bool = False):
    """The value unwritten memory of this dtype reads as (``zero``: 0.0 for floats, in the gradient twin)."""
    d = dtypes.get(name)
    if d.is_float:
        return 0.0 if zero else np.nan
    if d.kind == "bool":
        return True
    return int(np.iinfo(d.np_dtype).min)


def alloc_on_chip(shape, name: str, fill=None, zero: bool = False):
    value = poison(name, zero) if fill is None else fill
    return jnp.full(tuple(shape), value, dtype=compute_dtype(name))


def alloc_hbm(shape, name: str, zero: bool = False):
    return jnp.full(tuple(shape), poison(name, zero), dtype=storage_dtype(name))


def held_dtype(tensor_type) -> np.dtype:
    """The dtype a tensor of this IR type is held in by this backend."""
    return compute_dtype(tensor_type.dtype) if tensor_type.buffer.on_chip else storage_dtype(tensor_type.dtype)


def fresh(tensor_type, zero: bool = False):
    """A poisoned array for a tensor of this IR type."""
    if tensor_type.buffer.on_chip:
        return alloc_on_chip(tensor_type.shape, tensor_type.dtype, zero=zero)
    return alloc_hbm(tensor_type.shape, tensor_type.dtype, zero=zero)


def bitcast(value, src: str, dst: str):
    """Held tile values of dtype ``src`` with their bits read as dtype ``dst`` (ir/bitcast.py, as the NumPy
    reference's ``runtime.bitcast``): ``lax.bitcast_convert_type`` between the storage types, the last axis split
    or merged by the size ratio."""
    a, b = dtypes.get(src), dtypes.get(dst)
    raw = jnp.asarray(value).astype(a.np_dtype)
    if a.itemsize < b.itemsize:  # narrow -> wide: groups of the last axis become one element
        raw = raw.reshape(raw.shape[:-1] + (raw.shape[-1] // (b.itemsize // a.itemsize), b.itemsize // a.itemsize))
    out = lax.bitcast_convert_type(raw, b.np_dtype)
    if a.itemsize > b.itemsize:  # wide -> narrow: each element becomes a group along the last axis
        out = out.reshape(out.shape[:-2] + (out.shape[-2] * out.shape[-1],))
    return out.astype(compute_dtype(dst))

