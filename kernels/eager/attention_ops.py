"""The eager attention's own ops, as timm's ``Attention.forward`` runs them without a fused kernel:

    q, k, v = qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4)   -> split_heads_kernel (a copy to (B, H, S, D))
    q = q * scale                                                  -> elementwise.scale_kernel
    attn = q @ k.transpose(-2, -1)                                 -> bmm_qk_kernel (scores to HBM)
    attn = attn.softmax(dim=-1)                                    -> softmax.softmax_kernel
    x = attn @ v                                                   -> bmm_pv_kernel
    x = x.transpose(1, 2).reshape(B, N, C)                         -> merge_heads_kernel

Each reads its inputs from HBM and writes its output to HBM. The matmuls contract on the partitions: the scores
take q^T and k^T by DMA transpose; ``attn @ v`` transposes probability blocks on the Tensor engine (all blocks
of a tile before its matmuls, through a ring of two PSUM banks, so the in-order Tensor engine does not wait on
each copy out of PSUM).
"""

import math

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BANK = 512


def _chunks(n, size):
    return [(s, min(size, n - s)) for s in range(0, n, size)]


@nki.jit
def split_heads_kernel(qkv, num_heads=1):
    """(B, S, 3 * H * D) -> q, k, v in (B, H, S, D): whole rows in (one DMA per row tile), one head slice out per
    DMA."""
    batch, seq, width = qkv.shape
    d = width // (3 * num_heads)
    outs = tuple(nl.ndarray((batch, num_heads, seq, d), dtype=qkv.dtype, buffer=nl.shared_hbm) for _ in range(3))
    i_p, i_w, i_d = nl.arange(PMAX)[:, None], nl.arange(width)[None, :], nl.arange(d)[None, :]
    for b in nl.affine_range(batch):
        for t in nl.affine_range(math.ceil(seq / PMAX)):
            r = t * PMAX + i_p
            ok = r < seq
            rows = nl.load(qkv[b, r, i_w], mask=ok)
            for which in range(3):
                for h in range(num_heads):
                    col = (which * num_heads + h) * d
                    nl.store(outs[which][b, h, r, i_d], value=rows[i_p, col + i_d], mask=ok)
    return outs


@nki.jit
def merge_heads_kernel(o):
    """(B, H, S, D) -> (B, S, H * D): head slices in, whole rows out."""
    batch, heads, seq, d = o.shape
    out = nl.ndarray((batch, seq, heads * d), dtype=o.dtype, buffer=nl.shared_hbm)
    i_p, i_d, i_hd = nl.arange(PMAX)[:, None], nl.arange(d)[None, :], nl.arange(heads * d)[None, :]
    for b in nl.affine_range(batch):
        for t in nl.affine_range(math.ceil(seq / PMAX)):
            r = t * PMAX + i_p
            ok = r < seq
            rows = nl.ndarray((nl.par_dim(PMAX), heads * d), dtype=o.dtype)
            for h in range(heads):
                nisa.dma_copy(dst=rows[i_p, h * d + i_d], src=o[b, h, r, i_d], mask=ok)
            nl.store(out[b, r, i_hd], value=rows, mask=ok)
    return out


@nki.jit
def bmm_qk_kernel(q, k):
    """(B, H, S, D) x (B, H, S, D) -> scores (B, H, S, S) = q @ k^T, in q's dtype."""
    batch, heads, seq, d = q.shape
    out = nl.ndarray((batch, heads, seq, seq), dtype=q.dtype, buffer=nl.shared_hbm)
    i_p, i_d, i_dp = nl.arange(PMAX)[:, None], nl.arange(d)[None, :], nl.arange(d)[:, None]
    for b in nl.affine_range(batch):
        for h in nl.affine_range(heads):
            kT = nl.load_transpose2d(k[b, h, nl.arange(seq)[:, None], i_d])  # [d, seq]
            for t in nl.affine_range(math.ceil(seq / PMAX)):
                r = t * PMAX + i_p
                ok = r < seq
                qT = nl.load_transpose2d(q[b, h, r, i_d], mask=ok)
                for c0, cs in _chunks(seq, BANK):
                    i_c = nl.arange(cs)[None, :]
                    s = nisa.nc_matmul(qT, kT[i_dp, c0 + i_c], mask=ok)
                    nl.store(out[b, h, r, c0 + i_c], value=nisa.tensor_copy(s, dtype=q.dtype, mask=ok), mask=ok)
    return out


@nki.jit
def bmm_pv_kernel(p, v):
    """(B, H, S, S) x (B, H, S, D) -> (B, H, S, D) = p @ v."""
    batch, heads, seq, d = v.shape
    out = nl.ndarray((batch, heads, seq, d), dtype=v.dtype, buffer=nl.shared_hbm)
    k_tiles = _chunks(seq, PMAX)
    i_p, i_d, i_q = nl.arange(PMAX)[:, None], nl.arange(d)[None, :], nl.arange(PMAX)[None, :]
    for b in nl.affine_range(batch):
        for h in nl.affine_range(heads):
            v_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), d), dtype=v.dtype)
            for j, (k0, ks) in enumerate(k_tiles):
                v_sb[j, nl.arange(ks)[:, None], i_d] = nl.load(v[b, h, k0 + nl.arange(ks)[:, None], i_d])
            for t in nl.affine_range(math.ceil(seq / PMAX)):
                r = t * PMAX + i_p
                ok = r < seq
                cols_ok = t * PMAX + i_q < seq
                rows = nl.load(p[b, h, r, nl.arange(seq)[None, :]], mask=ok)
                t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=p.dtype, buffer=nl.psum)
                pT = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), PMAX), dtype=p.dtype)
                for j, (k0, ks) in enumerate(k_tiles):
                    i_k = nl.arange(ks)[:, None]
                    t_ps[j % 2, i_k, i_q] = nisa.nc_transpose(rows[i_p, k0 + nl.arange(ks)[None, :]], mask=cols_ok)
                    pT[j, i_k, i_q] = nisa.tensor_copy(t_ps[j % 2, i_k, i_q], mask=cols_ok)
                acc = nl.ndarray((nl.par_dim(PMAX), d), dtype=nl.float32, buffer=nl.psum)
                for j, (_, ks) in enumerate(k_tiles):
                    prod = nisa.nc_matmul(pT[j, nl.arange(ks)[:, None], i_q], v_sb[j, nl.arange(ks)[:, None], i_d],
                                          mask=ok)  # fmt: skip
                    if j == 0:
                        acc[i_p, i_d] = prod
                    else:
                        acc[i_p, i_d] += prod
                nl.store(out[b, h, r, i_d], value=nisa.tensor_copy(acc, dtype=v.dtype, mask=ok), mask=ok)
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
