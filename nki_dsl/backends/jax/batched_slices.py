"""``dynamic_slice`` / ``dynamic_update_slice`` that stay window operations under ``jax.vmap`` when only the array
is batched.

JAX batches both primitives as a gather / scatter whatever is batched (its rules delegate to gather's and
scatter's). A vectorised loop (``vectorise``) whose body holds a ``lax.fori_loop`` (a loop of its own, or a
re-rolled run, ``reroll``) then turns every window at a loop-dependent start into a gather or scatter over the
whole batch, which XLA's CPU backend runs many times slower (the re-rolled ViT attention: 5.5 -> 18 ms). When
the starts are the same for every batch element, the batched operation is the same window with the batch axis
taken whole: that is what the custom batching rule here emits (``jax.custom_batching.custom_vmap``); with batched
starts it falls back to JAX's own rule.

Derivatives: ``custom_vmap`` has no reverse mode, so each helper is a ``custom_jvp`` whose tangent is the plain
``lax`` operation on the tangents (both are linear in the arrays; JAX transposes the plain one). Only derivative
code pays JAX's gather/scatter batching then.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


def _front(x, batched: bool, size: int):
    return x if batched else jnp.broadcast_to(x, (size, *jnp.shape(x)))


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _slice(x, starts, sizes):
    return _slice_vmappable(x, starts, sizes)


@_slice.defjvp
def _slice_jvp(sizes, primals, tangents):
    x, starts = primals
    dx, _ = tangents
    return _slice(x, starts, sizes), lax.dynamic_slice(dx, list(starts), sizes, allow_negative_indices=False)


def _slice_vmappable(x, starts, sizes):
    @jax.custom_batching.custom_vmap
    def fn(x, starts):
        return lax.dynamic_slice(x, list(starts), sizes, allow_negative_indices=False)

    @fn.def_vmap
    def rule(axis_size, in_batched, x, starts):
        x_b, starts_b = in_batched
        if any(jax.tree_util.tree_leaves(starts_b)):  # per-element starts: a gather (JAX's rule)
            x = _front(x, x_b, axis_size)
            out = jax.vmap(lambda a, s: lax.dynamic_slice(a, list(s), sizes, allow_negative_indices=False),
                           in_axes=(0, tuple(0 if b else None for b in starts_b)))(x, starts)  # fmt: skip
            return out, True
        if not x_b:
            return fn(x, starts), False
        # the batch axis (in front) taken whole: still a window (and still a window under an outer vmap)
        return _slice(x, (jnp.int32(0), *starts), (axis_size, *sizes)), True

    return fn(x, tuple(starts))


@jax.custom_jvp
def _update(x, w, starts):
    return _update_vmappable(x, w, starts)


@_update.defjvp
def _update_jvp(primals, tangents):
    x, w, starts = primals
    dx, dw, _ = tangents
    return _update(x, w, starts), lax.dynamic_update_slice(dx, dw, list(starts), allow_negative_indices=False)


def _update_vmappable(x, w, starts):
    @jax.custom_batching.custom_vmap
    def fn(x, w, starts):
        return lax.dynamic_update_slice(x, w, list(starts), allow_negative_indices=False)

    @fn.def_vmap
    def rule(axis_size, in_batched, x, w, starts):
        x_b, w_b, starts_b = in_batched
        if any(jax.tree_util.tree_leaves(starts_b)):  # per-element starts: a scatter (JAX's rule)
            x, w = _front(x, x_b, axis_size), _front(w, w_b, axis_size)
            out = jax.vmap(lambda a, u, s: lax.dynamic_update_slice(a, u, list(s), allow_negative_indices=False),
                           in_axes=(0, 0, tuple(0 if b else None for b in starts_b)))(x, w, starts)  # fmt: skip
            return out, True
        if not (x_b or w_b):
            return fn(x, w, starts), False
        x, w = _front(x, x_b, axis_size), _front(w, w_b, axis_size)
        return _update(x, w, (jnp.int32(0), *starts)), True

    return fn(x, w, tuple(starts))


def dynamic_slice(x, starts, sizes):
    """``lax.dynamic_slice(x, starts, sizes)`` for starts that keep the window inside ``x``."""
    starts = tuple(jnp.asarray(s, jnp.int32) for s in starts)
    return _slice(x, starts, tuple(int(n) for n in sizes))


def dynamic_update_slice(x, w, starts):
    """``lax.dynamic_update_slice(x, w, starts)`` for starts that keep the window inside ``x``."""
    starts = tuple(jnp.asarray(s, jnp.int32) for s in starts)
    return _update(x, jnp.asarray(w, x.dtype), starts)
