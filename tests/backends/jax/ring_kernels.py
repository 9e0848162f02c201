"""Kernels both loop re-rolling and batching are tested on, and the on/off comparisons of their tests.

``ring_tiles``: a Python loop of row tiles, each exponentiated into ring slot ``t % 3`` (shared by tiles t and
t + 3, and not affine in t), summed, divided and stored."""

import jax
import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

P = 128


@nki.jit
def ring_tiles(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((3, nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    for t in range(rows // P):
        ring[t % 3, i_p, i_f] = nl.exp(nl.load(x[t * P + i_p, i_f]))
        total = nl.sum(ring[t % 3, i_p, i_f], axis=1, keepdims=True)
        nl.store(out[t * P + i_p, i_f], value=nl.divide(ring[t % 3, i_p, i_f], total))
    return out


@nki.jit
def running_sum(x):
    """Out tile t = the sum of x tiles 0 .. t, accumulated in one SBUF tile every step reads and writes: the adds
    form a chain (each reads the previous one's write), which may be re-rolled in order but not batched."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    acc[i_p, i_f] = nl.exp(nl.load(x[i_p, i_f]))
    nl.store(out[i_p, i_f], value=acc[i_p, i_f])
    for t in range(1, rows // P):
        acc[i_p, i_f] = nl.add(acc[i_p, i_f], nl.exp(nl.load(x[t * P + i_p, i_f])))
        nl.store(out[t * P + i_p, i_f], value=acc[i_p, i_f])
    return out


def on_and_off(module, monkeypatch, kernel, run):
    """``run(fresh kernel)`` with ``module.ENABLED`` (re-rolling's or batching's switch) on, then off: the two results
    a test compares. Each run gets a new kernel object, so no trace or executable is shared between them."""
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(module, "ENABLED", enabled)
        results.append(np.asarray(run(nki.jit(kernel.fn))))
    return results


def grad_of_weighted_sum(k, x):
    """d/dx of sum(k(x) * column index), on JAX: a gradient that weighs each output column differently."""
    weights = np.arange(x.shape[1], dtype=np.float32)
    return jax.grad(lambda a: (k(a, backend="jax") * weights).sum())(jax.numpy.asarray(x))


def under_vmap(k, xs):
    """k over the leading axis of ``xs`` by the user's ``jax.vmap``."""
    return jax.vmap(lambda a: k(a, backend="jax"))(jax.numpy.asarray(xs))
