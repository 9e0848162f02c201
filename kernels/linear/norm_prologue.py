"""A LayerNorm prologue for the kernels that contract over the feature axis (``linear``, the fused MLP): rows of
``x`` in, ``LN(x)^T`` tiles out, ready to be a matmul operand, without the normalised rows ever going to HBM.

The statistics need the features on the free axis (rows on partitions), the matmul needs them on the partitions,
so each 128-row tile is normalised as rows and then transposed on the Tensor engine, one [128 rows, 128
features] block at a time. After the transpose a feature is a partition, so ``gamma`` and ``beta`` are
per-partition values: they become the ``scale`` and ``bias`` of the Scalar-engine copy that brings the transpose
out of PSUM, and cost nothing on top of that copy. Per row tile:

* Vector: ``bn_stats`` per 512 columns (the instruction's limit, reference/nki.md §2.3), ``bn_aggr`` (mean,
  variance), and ``-mean * rstd`` (one ``tensor_scalar``);
* Scalar: ``rstd = rsqrt(var + eps)``, the normalisation ``x * rstd - mean * rstd`` as one ``activation`` with
  per-row scale and bias, and the PSUM copies applying gamma and beta;
* Tensor: the transposes (``max(P, min(64, F))`` cycles each, §2.3: 128 for a full block).

Compared with a separate layernorm launch this saves the normalised activations' round trip through HBM, the
launch's fixed DMA costs, and the DMA transposes of x^T that the linear would otherwise make.
"""

import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BN_STATS_FMAX = 512  # bn_stats reads at most 512 elements per partition (reference/nki.md §2.3, tile_size)


def norm_columns(vecs, k_tiles):
    """The vectors ``vecs`` (each (n,)) as columns on the partitions: ``cols[p, i * kt + j] = vecs[i][k0_j + p]``
    for ``kt`` K tiles. When n is a multiple of 128 each vector comes in as one contiguous [kt, 128] load (256 B
    per row) into one tile, and one Tensor-engine transpose turns them all into columns; otherwise one [k, 1] load
    per K tile and vector (2-byte descriptors, each load paying a DMA's fixed cost)."""
    n, kt, nv = vecs[0].shape[0], len(k_tiles), len(vecs)
    cols = nl.ndarray((nl.par_dim(PMAX), nv * kt), dtype=vecs[0].dtype)
    if n % PMAX or nv * kt > PMAX:
        for i, vec in enumerate(vecs):
            for j, (k0, ks) in enumerate(k_tiles):
                cols[nl.arange(ks)[:, None], i * kt + j] = nl.load(vec.reshape((n, 1))[k0 + nl.arange(ks)[:, None],
                                                                                       0])  # fmt: skip
        return cols
    i_j, i_p = nl.arange(kt)[:, None], nl.arange(PMAX)[None, :]
    blocks = nl.ndarray((nl.par_dim(nv * kt), PMAX), dtype=vecs[0].dtype)  # vector i's K tile j on partition i*kt+j
    for i, vec in enumerate(vecs):
        nisa.dma_copy(dst=blocks[i * kt + i_j, i_p], src=vec.reshape((kt, PMAX))[i_j, i_p])
    cols[nl.arange(PMAX)[:, None], nl.arange(nv * kt)[None, :]] = nisa.activation(nl.copy, nisa.nc_transpose(blocks))
    return cols


class LayerNormPrologue:
    """``LN(x)^T`` for row tiles of ``x``: ``gamma``/``beta`` loaded once as columns and an epsilon tile; each
    tile's transposes rotate over two PSUM banks of its own (allocated per call, so that a tile inside an
    ``affine_range`` does not reuse the previous iteration's, and transpose j+1 does not wait for copy j).)"""

    def __init__(self, x, gamma, beta, epsilon, k_tiles):
        self.x, self.k_tiles = x, k_tiles
        n = x.shape[1]
        self.chunks = [(s, min(BN_STATS_FMAX, n - s)) for s in range(0, n, BN_STATS_FMAX)]
        self.cols = norm_columns((gamma, beta), k_tiles)  # gamma's K tile j in column j, beta's in kt + j
        self.eps = nl.full((nl.par_dim(PMAX), 1), epsilon, dtype=nl.float32)

    def ring(self, n, nrows):
        """Buffers for ``n`` tiles in flight: their rows, their normalised rows and their statistics. Explicit
        slots, because tensors the allocator placed on the same bytes by program order would make tile n+1's
        load and statistics wait for tile n's normalisation."""
        shape = (n, nl.par_dim(nrows), self.x.shape[1])
        stats = nl.ndarray((n, nl.par_dim(nrows), 6 * len(self.chunks) + 4), dtype=nl.float32)
        return nl.ndarray(shape, dtype=self.x.dtype), nl.ndarray(shape, dtype=self.x.dtype), stats

    def normalise(self, bufs, slot, r0, nrows, ok=None):
        """Load rows ``r0 .. r0 + nrows - 1`` (``r0`` may be a loop index; ``ok`` masks a ragged tile) into slot
        ``slot`` of ``bufs`` (from ``ring``) and normalise them there: ``(rows - mean) * rstd`` (Vector
        statistics, Scalar normalisation), in x's dtype. Returns (rows, normalised rows)."""
        return self.normalise_many(bufs, [(slot, r0, nrows, ok)], z_on_vector=False)[0]

    def load(self, bufs, tiles):
        """The DMA part of ``normalise_many`` alone (``(slot, r0, nrows, ok)`` each), for a caller that issues the
        loads earlier in program order than the row work (DMA bandwidth is booked in issue order)."""
        i_f = nl.arange(self.x.shape[1])[None, :]
        for slot, r0, nrows, ok in tiles:
            i_p = nl.arange(nrows)[:, None]
            nisa.dma_copy(dst=bufs[0][slot, i_p, i_f], src=self.x[r0 + i_p, i_f], mask=ok)  # straight into the slot

    def normalise_many(self, bufs, tiles, z_on_vector=True, loaded=False):
        """``normalise`` for several row tiles (``(slot, r0, nrows, ok)`` each), stage by stage: every tile's
        statistics (Vector), every ``rstd`` (Scalar), then every normalisation, so that one tile's Vector -> Scalar
        -> Vector round trip does not hold up the next tile's statistics. ``z_on_vector``: the normalisation as one
        Vector ``tensor_scalar`` (``(x - mean) * rstd``; bf16 in and out of SBUF runs in the 4x perf mode, §3.3)
        for kernels whose Scalar engine is the busier one, else one Scalar ``activation``. ``loaded``: the rows
        are already in their slots (``load``)."""
        x, n = self.x, self.x.shape[1]
        rows_sb, z_sb, st = bufs
        i_f = nl.arange(n)[None, :]
        at = 6 * len(self.chunks)  # after the bn_stats: mean, variance, rstd, -mean * rstd
        if not loaded:
            self.load(bufs, tiles)
        for slot, _, nrows, ok in tiles:
            i_p = nl.arange(nrows)[:, None]
            for c, (start, size) in enumerate(self.chunks):
                st[slot, i_p, 6 * c + nl.arange(6)[None, :]] = nisa.bn_stats(rows_sb[slot, i_p, start + nl.arange(
                    size)[None, :]], mask=ok, dtype=nl.float32)  # fmt: skip
            st[slot, i_p, at + nl.arange(2)[None, :]] = nisa.bn_aggr(st[slot, i_p, nl.arange(at)[None, :]], mask=ok)
        for slot, _, nrows, ok in tiles:
            i_p = nl.arange(nrows)[:, None]
            st[slot, i_p, at + 2] = nisa.activation(nl.rsqrt, st[slot, i_p, at + 1], bias=self.eps[i_p, 0], mask=ok)
        out = []
        for slot, _, nrows, ok in tiles:
            i_p = nl.arange(nrows)[:, None]
            rows = rows_sb[slot, i_p, i_f]
            if z_on_vector:
                z_sb[slot, i_p, i_f] = nisa.tensor_scalar(rows, nl.subtract, st[slot, i_p, at], op1=nl.multiply,
                                                          operand1=st[slot, i_p, at + 2], mask=ok,
                                                          dtype=x.dtype)  # fmt: skip
            else:
                st[slot, i_p, at + 3] = nisa.tensor_scalar(st[slot, i_p, at], nl.multiply, st[slot, i_p, at + 2],
                                                           op1=nl.multiply, operand1=-1.0, mask=ok)  # fmt: skip
                z_sb[slot, i_p, i_f] = nisa.activation(nl.copy, rows, scale=st[slot, i_p, at + 2],
                                                       bias=st[slot, i_p, at + 3], mask=ok, dtype=x.dtype)  # fmt: skip
            out.append((rows, z_sb[slot, i_p, i_f]))
        return out

    def transpose(self, z, nrows, xT, col0, cols_ok=None):
        """Write ``z^T * gamma + beta`` (``z`` [nrows, K] from ``normalise``) into columns ``col0 .. col0 + nrows - 1``
        of the K tiles ``xT[j]`` ([k, width] each); ``cols_ok`` masks the rows of a ragged tile as columns (the
        transposes' free axis)."""
        i_p = nl.arange(nrows)[:, None]
        i_c, i_t = col0 + nl.arange(nrows)[None, :], nl.arange(nrows)[None, :]
        t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=self.x.dtype, buffer=nl.psum)
        kt = len(self.k_tiles)
        for j, (k0, ks) in enumerate(self.k_tiles):
            i_k = nl.arange(ks)[:, None]
            t_ps[j % 2, i_k, i_t] = nisa.nc_transpose(z[i_p, k0 + nl.arange(ks)[None, :]], mask=cols_ok)
            xT[j, i_k, i_c] = nisa.activation(nl.copy, t_ps[j % 2, i_k, i_t], scale=self.cols[i_k, j],
                                              bias=self.cols[i_k, kt + j], mask=cols_ok)  # fmt: skip
