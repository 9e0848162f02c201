"""Indirect DMA on the JAX backend (ir/indirect.py): partition ``p`` of the tile moves row ``indices[p]`` of the HBM
tensor's ``indirect_dim``, a gather (``.at[].get``) or a scatter (``.at[].set`` / ``.add``) with one index array
per HBM dimension.

The rows are checked when the program runs: a host callback raises ``NkiRuntimeError`` for the first row outside
the dimension (naming the kernel line, the op, the partition, the value and the dimension, as the NumPy reference
does). XLA reports a callback's exception as its own runtime error; ``Executable.call`` re-raises the
``NkiRuntimeError`` recorded here in its place. Inside a user's ``jax.jit`` the message arrives inside XLA's
error. A ``nisa.dma_copy`` with ``oob_mode=skip`` checks nothing and drops each out-of-range partition's transfer
instead (a gather keeps that partition of ``dst``, a scatter sends it to a row past the tensor, which XLA's
``mode="drop"`` discards), as the NumPy reference does. Repeated scatter rows: ``set`` keeps one of them (XLA
does not define which), ``add`` sums them all.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np

from nki_dsl.backends.jax import runtime
from nki_dsl.backends.jax.access import axis_values, split, value_of
from nki_dsl.backends.jax.context import Lowered
from nki_dsl.errors import NkiRuntimeError
from nki_dsl.ir import indirect

# The NkiRuntimeErrors bounds-check callbacks raised, for Executable.call to re-raise: XLA runs callbacks on its
# own threads, so this is shared, and matched to XLA's error by message.
_raised: list[NkiRuntimeError] = []
_lock = threading.Lock()


def _check(where, size: int):
    loc, op, tensor, dim = where

    def check(rows, kept) -> None:
        rows = np.asarray(rows)
        bad = np.flatnonzero(((rows < 0) | (rows >= size)) & np.asarray(kept))
        if bad.size:
            p = int(bad[0])
            err = NkiRuntimeError(f"index {int(rows[p])} from partition {p} of operand 'indices' is outside "
                                  f"dimension {dim} of %{tensor} (0..{size - 1}); {bad.size} of {rows.size} "
                                  f"indices are out of range", loc, op)  # fmt: skip
            raise_recorded(err)

    return check


def raise_recorded(err: NkiRuntimeError) -> None:
    """Raise ``err`` from a host callback, recorded for ``runtime_error`` (also used by ``runtime_loops``)."""
    with _lock:
        _raised.append(err)
        del _raised[:-8]
    raise err


def checks_rows(kernel) -> bool:
    """Whether ``kernel`` has an indirect DMA (whose rows a callback checks when the program runs)."""
    return any(indirect.INDICES in op.operands for op, _ in kernel.walk() if hasattr(op, "operands"))


def runtime_error(e: Exception) -> Exception:
    """The ``NkiRuntimeError`` behind XLA runtime error ``e`` (consumed), or ``e`` itself."""
    with _lock:
        for k, err in enumerate(_raised):
            if err.bare_message in str(e):
                del _raised[k]
                return err
    return e


def lower(ctx, side: str) -> Lowered:
    op = ctx.op
    hbm = op.operands[side]
    dim = op.attrs[indirect.DIM]
    size = hbm.tensor.type.shape[dim]
    shape = tuple(hbm.shape)
    rows = jnp.asarray(ctx.read("indices")).reshape(shape[0], -1)[:, 0].astype(jnp.int32)
    # a gather's mask cuts partitions only (rule indirect-dma): the indices of masked-off ones are not checked,
    # and what they read (clipped into the tensor) is dropped by the masked write of the result
    kept = ctx.mask.rows()[:, 0] if ctx.mask is not None else jnp.ones(rows.shape, bool)
    skip = op.attrs.get("oob_mode") == "skip"
    in_range = (rows >= 0) & (rows < size)
    if not skip:
        jax.debug.callback(_check((op.loc, op.name, hbm.tensor.name, dim), size), rows, kept)
    # a skipping scatter aims the partitions out of range past the tensor (dropped); every other access stays inside
    picked = jnp.where(in_range, rows, size) if skip and side == "dst" else jnp.clip(rows, 0, size - 1)
    idx = []
    for k, e in enumerate(hbm.index):
        if k == dim:
            r = picked.reshape((shape[0],) + (1,) * (len(shape) - 1))
            idx.append(jnp.broadcast_to(r, shape))
            continue
        axes, rest = split(e)
        v = axis_values(axes, shape)
        s = jnp.asarray(value_of(rest, ctx.ivars), jnp.int32)
        idx.append(jnp.broadcast_to(s if v is None else v + s, shape))
    array = ctx.state.array(hbm.tensor.name)
    if side == "src":  # a gather
        value = array.at[tuple(idx)].get(mode="promise_in_bounds")
        if op.result is not None:
            return Lowered(value)
        if skip:  # the skipped partitions of dst keep their values
            dst = op.operands["dst"]
            ok = in_range.reshape((shape[0],) + (1,) * (len(shape) - 1))
            value = jnp.where(ok, runtime.round_to(value, dst.tensor.type.dtype), ctx.read("dst"))
        return Lowered(writes=[("dst", value, op.attrs.get("dst_rmw_op", "none"))])
    value = jnp.broadcast_to(ctx.read("value" if "value" in op.operands else "src"), shape)
    value = runtime.to_hbm(value, hbm.tensor.type.dtype)
    mode = "drop" if skip else None
    if op.attrs.get("dst_rmw_op", "none") == "add":
        new = array.at[tuple(idx)].add(value.astype(array.dtype), mode=mode)
    else:
        new = array.at[tuple(idx)].set(value.astype(array.dtype), mode=mode)
    ctx.state.set_array(hbm.tensor.name, new)
    return Lowered()
