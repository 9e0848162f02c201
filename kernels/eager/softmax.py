"""The eager row softmax (``torch.softmax(x, dim=-1)`` on a ``[rows, cols]`` view): rows on partitions, the row
max on the Vector engine, ``exp(x - max)`` with its row sum fused in one Scalar-engine ``activation``, the division
on the Vector engine. Row tiles go in groups of ``GROUP``, stage by stage, so the in-order engines overlap (one
tile's exp runs while the next tile's max is taken)."""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
GROUP = 4


def _group(x, out, first, count, rows, cols):
    i_p, i_f = nl.arange(PMAX)[:, None], nl.arange(cols)[None, :]
    tiles = []
    for u in range(count):
        r = (first + u) * PMAX + i_p
        ok = r < rows
        tile = nl.load(x[r, i_f], mask=ok)
        tiles.append(dict(r=r, ok=ok, tile=tile,
                          neg_max=nisa.tensor_reduce(np.max, tile, axis=(1,), negate=True, keepdims=True, mask=ok)))
    for t in tiles:
        t["sum"] = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
        t["e"] = nisa.activation(np.exp, t["tile"], bias=t["neg_max"], reduce_op=np.add, reduce_res=t["sum"],
                                 mask=t["ok"], dtype=nl.float32)  # fmt: skip
    for t in tiles:
        y = nisa.tensor_scalar(t["e"], np.divide, t["sum"], dtype=x.dtype, mask=t["ok"])
        nl.store(out[t["r"], i_f], value=y, mask=t["ok"])


@nki.jit
def softmax_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    n_tiles = math.ceil(rows / PMAX)
    for grp in nl.affine_range(n_tiles // GROUP):
        _group(x, out, grp * GROUP, GROUP, rows, cols)
    if n_tiles % GROUP:
        _group(x, out, n_tiles - n_tiles % GROUP, n_tiles % GROUP, rows, cols)
    return out
