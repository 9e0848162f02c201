"""The eager row softmax (``torch.softmax(x, dim=-1)`` on a ``[rows, cols]`` view).

Each partition takes ``r`` consecutive rows (``elementwise.rows_per_partition``: one contiguous run of >= 4 KiB
where a divisor of the row count allows, so a transfer's ~1.3 us fixed cost hides behind its streaming,
reference/nki.md §3.4), so a tile is [128, r, cols]: the row maxima of all r rows in one Vector ``tensor_reduce``,
``exp(x - max)`` with its row sum fused into one Scalar-engine ``activation`` per row (the bias is per
partition), the reciprocals of the sums in one Vector instruction and the scaling by them per row, round robin
over GpSimd, Scalar, Vector, GpSimd (measured on trn2 at ViT-B/16 batch 8's 18,912 x 197 bf16: 63.1 us with the
scaling on Vector and GpSimd alternately, 59.8 us with this; the Vector engine also takes the maxima). Tiles go
in groups of ``GROUP``, stage by stage, so the in-order engines overlap (one tile's exp runs while the next
tile's max is taken)."""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .elementwise import rows_per_partition

PMAX = 128
GROUP = 4
_SCALE_ENGINES = (nisa.gpsimd_engine, nisa.scalar_engine, nisa.vector_engine, nisa.gpsimd_engine)  # see above


def _group(x, out, first, count, n_rows, r, cols):
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(r * cols)[None, :]
    i_p3, i_j3, i_c3 = nl.arange(PMAX)[:, None, None], nl.arange(r)[None, :, None], nl.arange(cols)[None, None, :]
    i_c, i_one = nl.arange(cols)[None, :], nl.arange(1)[None, :]
    tiles = []
    for u in range(count):
        idx = (first + u) * PMAX + i_p
        ok = idx < n_rows
        tile = nl.load(x[idx, i_w], mask=ok)
        neg_max = nl.ndarray((nl.par_dim(PMAX), r), dtype=nl.float32)
        neg_max[i_p, nl.arange(r)[None, :]] = nisa.tensor_reduce(np.max, tile[i_p3, i_j3 * cols + i_c3], axis=(2,),
                                                                 negate=True, mask=ok)  # fmt: skip
        tiles.append(dict(idx=idx, ok=ok, tile=tile, neg_max=neg_max))
    for t in tiles:
        t["sum"] = nl.ndarray((nl.par_dim(PMAX), r), dtype=nl.float32)
        t["e"] = nl.ndarray((nl.par_dim(PMAX), r * cols), dtype=nl.float32)
        for j in range(r):
            t["e"][i_p, j * cols + i_c] = nisa.activation(np.exp, t["tile"][i_p, j * cols + i_c],
                                                          bias=t["neg_max"][i_p, j + i_one], reduce_op=np.add,
                                                          reduce_res=t["sum"][i_p, j + i_one], mask=t["ok"],
                                                          dtype=nl.float32)  # fmt: skip
    for t in tiles:
        inv = nisa.reciprocal(t["sum"], mask=t["ok"])
        y = nl.ndarray((nl.par_dim(PMAX), r * cols), dtype=x.dtype)
        for j in range(r):
            engine = _SCALE_ENGINES[j % len(_SCALE_ENGINES)]
            y[i_p, j * cols + i_c] = nisa.tensor_scalar(t["e"][i_p, j * cols + i_c], np.multiply, inv[i_p, j + i_one],
                                                        dtype=x.dtype, mask=t["ok"], engine=engine)  # fmt: skip
        t["y"] = y
    for t in tiles:  # the stores after every tile's scaling: the tiles' results live at once, so they are distinct
        # buffers and a tile's scaling does not wait for the previous tile's store
        nl.store(out[t["idx"], i_w], value=t["y"], mask=t["ok"])


@nki.jit
def softmax_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    r = rows_per_partition(rows, cols, np.dtype(x.dtype).itemsize)
    n_rows = rows // r
    xv, ov = x.reshape((n_rows, r * cols)), out.reshape((n_rows, r * cols))
    n_tiles = math.ceil(n_rows / PMAX)
    for grp in nl.affine_range(n_tiles // GROUP):
        _group(xv, ov, grp * GROUP, GROUP, n_rows, r, cols)
    if n_tiles % GROUP:
        _group(xv, ov, n_tiles - n_tiles % GROUP, n_tiles % GROUP, n_rows, r, cols)
    return out
