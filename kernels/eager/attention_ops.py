"""The eager attention's own ops, as timm's ``Attention.forward`` runs them without a fused kernel:

    q, k, v = qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4)   -> split_heads_kernel (a copy to (B, H, S, D))
    q = q * scale                                                  -> elementwise.scale_kernel
    attn = q @ k.transpose(-2, -1)                                 -> bmm_qk_kernel (scores to HBM)
    attn = attn.softmax(dim=-1)                                    -> softmax.softmax_kernel
    x = attn @ v                                                   -> bmm_pv_kernel
    x = x.transpose(1, 2).reshape(B, N, C)                         -> merge_heads_kernel

Each reads its inputs from HBM and writes its output to HBM (one launch per op, nothing fused across ops).

They are tiled for the DMA engines as a competent per-op kernel would be (reference/nki.md §3.4: every transfer
pays a ~1.3 us fixed cost, hidden only behind >= 2-4 KiB per partition of streaming): each DMA moves several
heads at once with a 3-D access pattern ([rows, heads, head_dim] or [rows, heads, seq]), never one head's few
hundred bytes per partition. What remains is the (B, H, S, D) layout's own cost: a head's row is head_dim long,
so one side of split heads, merge heads and the matmuls' q, k, v and output transfers streams 128-byte runs (a
third of the DMA engines' peak at head_dim 64 bf16, §3.4's per-descriptor cost).

The matmuls contract on the partitions: the scores take q^T and k^T by 3-D DMA transpose; ``attn @ v``
transposes probability blocks on the Tensor engine (every block of a tile's heads before its matmuls, through a
ring of PSUM banks, so the in-order Tensor engine does not wait on each copy out of PSUM).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BANK = 512
TARGET_BYTES = 4096  # per partition per transfer: the DMA efficiency curve's fully amortised size (§3.4)
# PSUM -> SBUF copies alternate between the Vector and Scalar engines (the kernels have no other work for them)
_COPY = (nisa.vector_engine, nisa.scalar_engine)


def _chunks(n, size):
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def heads_per_transfer(heads: int, row_bytes: int) -> int:
    """Heads one transfer moves: the smallest divisor g of ``heads`` for which g rows of ``row_bytes`` make at
    least 4 KiB per partition (the DMA efficiency curve's fully amortised size, reference/nki.md §3.4: below it
    the transfer's ~1.3 us fixed cost is not hidden behind its streaming); all heads if none does."""
    want = math.ceil(TARGET_BYTES / max(1, row_bytes))
    return next((g for g in range(1, heads + 1) if heads % g == 0 and g >= want), heads)


def _grid3(a, b, c):
    return nl.arange(a)[:, None, None], nl.arange(b)[None, :, None], nl.arange(c)[None, None, :]


@nki.jit
def split_heads_kernel(qkv, num_heads=1):
    """(B, S, 3 * H * D) -> q, k, v in (B, H, S, D): per 128-row tile, the whole rows in (one DMA) and each of q,
    k and v out in one DMA whose partition rows hold every head's slice ([rows, H, D] in HBM)."""
    batch, seq, width = qkv.shape
    d = width // (3 * num_heads)
    outs = tuple(nl.ndarray((batch, num_heads, seq, d), dtype=qkv.dtype, buffer=nl.shared_hbm) for _ in range(3))
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    i_p3, i_h3, i_d3 = _grid3(PMAX, num_heads, d)
    for b in nl.affine_range(batch):
        for t in nl.affine_range(math.ceil(seq / PMAX)):
            rows = nl.load(qkv[b, t * PMAX + i_p, i_w], mask=t * PMAX + i_p < seq)
            r3 = t * PMAX + i_p3
            for which in range(3):
                nl.store(outs[which][b, i_h3, r3, i_d3], value=rows[i_p3, (which * num_heads + i_h3) * d + i_d3],
                         mask=r3 < seq)  # fmt: skip
    return outs


@nki.jit
def merge_heads_kernel(o):
    """(B, H, S, D) -> (B, S, H * D): per 128-row tile, every head's slice in (one DMA, [rows, H, D] from HBM),
    the whole rows out (one DMA)."""
    batch, heads, seq, d = o.shape
    out = nl.ndarray((batch, seq, heads * d), dtype=o.dtype, buffer=nl.shared_hbm)
    i_p, i_hd = nl.arange(PMAX)[:, None], nl.arange(heads * d)[None, :]
    i_p3, i_h3, i_d3 = _grid3(PMAX, heads, d)
    for b in nl.affine_range(batch):
        for t in nl.affine_range(math.ceil(seq / PMAX)):
            rows = nl.ndarray((nl.par_dim(PMAX), heads * d), dtype=o.dtype)
            r3 = t * PMAX + i_p3
            nisa.dma_copy(dst=rows[i_p3, i_h3 * d + i_d3], src=o[b, i_h3, r3, i_d3], mask=r3 < seq)
            nl.store(out[b, t * PMAX + i_p, i_hd], value=rows, mask=t * PMAX + i_p < seq)
    return out


@nki.jit
def bmm_qk_kernel(q, k):
    """(B, H, S, D) x (B, H, S, D) -> scores (B, H, S, S) = q @ k^T, in q's dtype. Heads go in groups of
    ``heads_per_transfer`` (a group's score rows make >= 4 KiB per partition): k^T of a group in one 3-D DMA
    transpose, q^T of a group's 128-row tile in one, the tile's scores of every head of the group out in one.
    (Measured on trn2, ViT-B/16 batch 8: 102.5 us; loading rows and transposing them on the Tensor engine instead,
    128 partitions per load against head_dim, 108.9 us.)"""
    batch, heads, seq, d = q.shape
    out = nl.ndarray((batch, heads, seq, seq), dtype=q.dtype, buffer=nl.shared_hbm)
    g = heads_per_transfer(heads, seq * np.dtype(q.dtype).itemsize)
    i_p = nl.arange(PMAX)[:, None]
    i_s3, i_g3, i_d3 = _grid3(seq, g, d)
    i_q3, i_r3 = nl.arange(PMAX)[:, None, None], nl.arange(PMAX)[None, None, :]
    i_dp = nl.arange(d)[:, None]
    i_sp3, i_gs3, i_c3 = _grid3(PMAX, g, seq)
    for b in nl.affine_range(batch):
        for hg in nl.affine_range(heads // g):
            # [seq, g, d] -> [d, g, seq]: one transfer for the group's k^T
            kT = nisa.dma_transpose(k[b, hg * g + i_g3, i_s3, i_d3], axes=(2, 1, 0))
            for t in nl.affine_range(math.ceil(seq / PMAX)):
                r = t * PMAX + i_p
                ok = r < seq
                # [128, g, d] -> [d, g, 128] (the ragged tile's missing rows masked in the result's last axis)
                qT = nisa.dma_transpose(q[b, hg * g + i_g3, t * PMAX + i_q3, i_d3], axes=(2, 1, 0),
                                        mask=t * PMAX + i_r3 < seq)  # fmt: skip
                sc = nl.ndarray((nl.par_dim(PMAX), g * seq), dtype=q.dtype)
                ps = nl.ndarray((2, nl.par_dim(PMAX), BANK), dtype=nl.float32, buffer=nl.psum)
                turn = 0
                for h in range(g):
                    for c0, cs in _chunks(seq, BANK):
                        i_c = nl.arange(cs)[None, :]
                        ps[turn % 2, i_p, i_c] = nisa.nc_matmul(qT[i_dp, h, nl.arange(PMAX)[None, :]],
                                                                kT[i_dp, h, c0 + i_c], mask=ok)  # fmt: skip
                        sc[i_p, h * seq + c0 + i_c] = nisa.tensor_copy(ps[turn % 2, i_p, i_c], dtype=q.dtype,
                                                                       mask=ok, engine=_COPY[turn % 2])  # fmt: skip
                        turn += 1
                r3 = t * PMAX + i_sp3
                nl.store(out[b, hg * g + i_gs3, r3, i_c3], value=sc[i_sp3, i_gs3 * seq + i_c3], mask=r3 < seq)
    return out


@nki.jit
def bmm_pv_kernel(p, v):
    """(B, H, S, S) x (B, H, S, D) -> (B, H, S, D) = p @ v. Heads in groups of ``heads_per_transfer``: a group's
    V in one DMA per 128-key tile, a 128-row tile's probability rows of the group in one, its outputs out in one."""
    batch, heads, seq, d = v.shape
    out = nl.ndarray((batch, heads, seq, d), dtype=v.dtype, buffer=nl.shared_hbm)
    g = heads_per_transfer(heads, seq * np.dtype(p.dtype).itemsize)
    k_tiles = _chunks(seq, PMAX)
    i_p, i_d, i_q = nl.arange(PMAX)[:, None], nl.arange(d)[None, :], nl.arange(PMAX)[None, :]
    i_p3, i_g3, i_d3 = _grid3(PMAX, g, d)
    i_c3 = nl.arange(seq)[None, None, :]
    for b in nl.affine_range(batch):
        for hg in nl.affine_range(heads // g):
            v_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), g * d), dtype=v.dtype)
            for j, (k0, _) in enumerate(k_tiles):
                nisa.dma_copy(dst=v_sb[j, i_p3, i_g3 * d + i_d3], src=v[b, hg * g + i_g3, k0 + i_p3, i_d3],
                              mask=k0 + i_p3 < seq)  # fmt: skip
            for t in nl.affine_range(math.ceil(seq / PMAX)):
                r = t * PMAX + i_p
                ok = r < seq
                cols_ok = t * PMAX + i_q < seq
                rows = nl.ndarray((nl.par_dim(PMAX), g * seq), dtype=p.dtype)
                nisa.dma_copy(dst=rows[i_p3, i_g3 * seq + i_c3], src=p[b, hg * g + i_g3, t * PMAX + i_p3, i_c3],
                              mask=t * PMAX + i_p3 < seq)  # fmt: skip
                # every head's P^T blocks before the first matmul (the in-order Tensor engine then finds each
                # block copied out of PSUM when it gets to it), through a ring of PSUM banks
                t_ps = nl.ndarray((4, nl.par_dim(PMAX), PMAX), dtype=p.dtype, buffer=nl.psum)
                pT = nl.ndarray((g * len(k_tiles), nl.par_dim(PMAX), PMAX), dtype=p.dtype)
                for h in range(g):
                    for j, (k0, ks) in enumerate(k_tiles):
                        n = h * len(k_tiles) + j
                        i_k = nl.arange(ks)[:, None]
                        t_ps[n % 4, i_k, i_q] = nisa.nc_transpose(rows[i_p, h * seq + k0 + nl.arange(ks)[None, :]],
                                                                  mask=cols_ok)  # fmt: skip
                        pT[n, i_k, i_q] = nisa.tensor_copy(t_ps[n % 4, i_k, i_q], mask=cols_ok, engine=_COPY[n % 2])
                o_sb = nl.ndarray((nl.par_dim(PMAX), g * d), dtype=v.dtype)
                acc = nl.ndarray((2, nl.par_dim(PMAX), d), dtype=nl.float32, buffer=nl.psum)
                for h in range(g):
                    for j, (_, ks) in enumerate(k_tiles):
                        i_k = nl.arange(ks)[:, None]
                        prod = nisa.nc_matmul(pT[h * len(k_tiles) + j, i_k, i_q], v_sb[j, i_k, h * d + i_d], mask=ok)
                        if j == 0:
                            acc[h % 2, i_p, i_d] = prod
                        else:
                            acc[h % 2, i_p, i_d] += prod
                    o_sb[i_p, h * d + i_d] = nisa.tensor_copy(acc[h % 2, i_p, i_d], dtype=v.dtype, mask=ok,
                                                              engine=_COPY[h % 2])  # fmt: skip
                r3 = t * PMAX + i_p3
                nl.store(out[b, hg * g + i_g3, r3, i_d3], value=o_sb[i_p3, i_g3 * d + i_d3], mask=r3 < seq)
    return out


@nki.jit
def embed_tokens_kernel(patches, cls, pos):
    """Patch embeddings (B * P, C) -> tokens (B * (P + 1), C): the class token first, then the patches, plus the
    position embedding (P + 1, C). Used by both the eager and the fused encoder."""
    n_patch_rows, c = patches.shape
    seq = pos.shape[0]
    batch = n_patch_rows // (seq - 1)
    out = nl.ndarray((batch * seq, c), dtype=patches.dtype, buffer=nl.shared_hbm)
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(c)[None, :]
    for b in nl.affine_range(batch):
        for t in range(math.ceil(seq / PMAX)):  # static: the class token is in the first tile only
            s = t * PMAX + i_p
            ok = s < seq
            x = nl.ndarray((nl.par_dim(PMAX), c), dtype=patches.dtype)
            if t == 0:
                nisa.dma_copy(dst=x[nl.arange(1)[:, None], i_c], src=cls.reshape((1, c)))
                rest = s >= 1
                nisa.dma_copy(dst=x[i_p, i_c], src=patches[b * (seq - 1) + s - 1, i_c], mask=rest & ok)
            else:
                nisa.dma_copy(dst=x[i_p, i_c], src=patches[b * (seq - 1) + s - 1, i_c], mask=ok)
            pt = nl.load(pos[s, i_c], mask=ok)
            nl.store(out[b * seq + s, i_c], value=nl.add(x, pt, mask=ok), mask=ok)
    return out
