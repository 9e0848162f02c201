"""The RMSNorm kernel: ``out = x / sqrt(mean(x^2) + epsilon) * g`` along rows; rows on partitions (tiles of
128), the weight loaded once and reused by every row tile, the ragged last tile masked."""

import math

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def rmsnorm_kernel(x, g, epsilon=1e-6):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    num_rows, n = x.shape
    i_p = nl.arange(nl.tile_size.pmax)[:, None]
    i_f = nl.arange(n)[None, :]
    g_tile = nl.load(g.reshape((1, n)))
    for t in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = t * nl.tile_size.pmax + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < num_rows))
        y = nl.rms_norm(tile, g_tile, axis=1, n=n, epsilon=epsilon, mask=(rows < num_rows))
        nl.store(out[rows, i_f], value=y, mask=(rows < num_rows))
    return out
