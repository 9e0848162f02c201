"""HBM views on the JAX backend (ir/hbm_views.py): a view holds no array of its own. Reading it reinterprets its
root's array (held in the root's storage dtype) as the view's storage dtype and shape; writing it reinterprets the
new array back into the root's, so a write through an int32 view of a float32 output is that output's bits."""

from __future__ import annotations

from jax import lax

from nki_dsl.backends.jax.runtime import storage_dtype


def reinterpret(value, dtype_name: str, shape: tuple[int, ...]):
    """``value``'s bytes, row-major, as an array of ``shape`` holding dtype ``dtype_name``'s storage (the same
    number of bytes: the verifier's ``shape`` and ``hbm-view`` rules hold every view to it)."""
    dst = storage_dtype(dtype_name)
    if value.dtype == dst:
        return value.reshape(shape)
    a, b = value.dtype.itemsize, dst.itemsize
    flat = value.reshape(-1)
    if a < b:  # narrow -> wide: groups of b // a elements become one
        flat = flat.reshape(-1, b // a)
    return lax.bitcast_convert_type(flat, dst).reshape(shape)  # wide -> narrow adds an axis of a // b
