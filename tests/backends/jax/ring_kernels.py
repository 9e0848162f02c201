"""A kernel both loop re-rolling and batching are tested on: a Python loop of row tiles, each exponentiated into
ring slot ``t % 3`` (shared by tiles t and t + 3, and not affine in t), summed, divided and stored."""

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
