"""The LayerNorm kernel: ``out = (x - mean) / sqrt(var + epsilon) * gamma + beta`` along rows.

Rows on partitions (tiles of 128, the ragged last tile masked, never padded). The statistics come from the
Vector engine's ``bn_stats`` (at most 512 elements per instruction, §2.3) and ``bn_aggr``; everything per row
after that is on the Scalar engine (``rstd`` = ``rsqrt`` with the epsilon as bias, ``-mean * rstd``, and the
normalisation ``x * rstd - mean * rstd`` as one ``activation`` with per-row ``scale`` and ``bias``), so the
in-order Vector engine goes on to the next tile's statistics instead of waiting for the Scalar engine. The
per-column ``gamma`` and ``beta`` (loaded once, spread over the 128 partitions by a broadcast DMA) are applied on
the GpSimd engine. Tiles can be issued in groups, stage by stage (``GROUP``).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BN_STATS_FMAX = 512  # bn_stats reads at most 512 elements per partition (reference/nki.md §2.3, tile_size)
GROUP = 1  # row tiles per stage-by-stage group (1, 2, 4, 8 measured on ViT-B/16 batch 8 shapes: 1 is fastest)


def _group(x, out, g, bt, eps, first, count, rows, n):
    """Row tiles ``first .. first + count - 1`` (``first`` may be a loop index), stage by stage."""
    i_p, i_f = nl.arange(PMAX)[:, None], nl.arange(n)[None, :]
    chunks = [(s, min(BN_STATS_FMAX, n - s)) for s in range(0, n, BN_STATS_FMAX)]
    tiles = []
    for u in range(count):
        r = (first + u) * PMAX + i_p
        ok = r < rows
        tile = nl.load(x[r, i_f], mask=ok)
        stats = nl.ndarray((nl.par_dim(PMAX), 6 * len(chunks)), dtype=nl.float32)
        for c, (start, size) in enumerate(chunks):
            stats[i_p, 6 * c + nl.arange(6)[None, :]] = nisa.bn_stats(tile[i_p, start + nl.arange(size)[None, :]],
                                                                      mask=ok, dtype=nl.float32)  # fmt: skip
        tiles.append(dict(r=r, ok=ok, tile=tile, mv=nisa.bn_aggr(stats, mask=ok)))  # [128, 2]: mean, variance
    for t in tiles:
        t["rstd"] = nisa.activation(nl.rsqrt, t["mv"][i_p, 1], bias=eps, mask=t["ok"])
    for t in tiles:  # -mean * rstd on the Scalar engine too (two copies with a scale), so the Vector engine
        # never waits for the Scalar engine in the middle of a tile
        neg_mean = nisa.activation(nl.copy, t["mv"][i_p, 0], scale=-1.0, mask=t["ok"])
        t["nmr"] = nisa.activation(nl.copy, neg_mean, scale=t["rstd"], mask=t["ok"])
    for t in tiles:
        t["z"] = nisa.activation(nl.copy, t["tile"], scale=t["rstd"], bias=t["nmr"], mask=t["ok"], dtype=x.dtype)
    for t in tiles:
        t["y"] = nisa.tensor_tensor(t["z"], g, np.multiply, mask=t["ok"], dtype=x.dtype, engine=nisa.gpsimd_engine)
    for t in tiles:
        o = nisa.tensor_tensor(t["y"], bt, np.add, mask=t["ok"], dtype=x.dtype, engine=nisa.gpsimd_engine)
        nl.store(out[t["r"], i_f], value=o, mask=t["ok"])


@nki.jit
def layernorm_kernel(x, gamma, beta, epsilon=1e-6):
    rows, n = x.shape
    out = nl.ndarray((rows, n), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.load(gamma.reshape((1, n))).broadcast_to((PMAX, n))
    bt = nl.load(beta.reshape((1, n))).broadcast_to((PMAX, n))
    eps = nl.full((nl.par_dim(PMAX), 1), epsilon, dtype=nl.float32)
    n_tiles = math.ceil(rows / PMAX)
    for grp in nl.affine_range(n_tiles // GROUP):
        _group(x, out, g, bt, eps, grp * GROUP, GROUP, rows, n)
    if n_tiles % GROUP:
        _group(x, out, g, bt, eps, n_tiles - n_tiles % GROUP, n_tiles % GROUP, rows, n)
    return out
