"""vit-attn from the split layout that a fused QKV projection writes for it (``linear``'s ``layernorm_qkv``):

* ``qkT`` (2 * heads * head_dim, tokens): q^T and (scale * k)^T, features on the rows, the tokens of all batch
  elements (batch-major) along the columns; the softmax scale is already applied to k by the projection;
* ``v`` (tokens, heads * head_dim): V token-major, as the P V matmul streams it.

The Tensor engine contracts over the partitions, so attention needs q and k with head_dim on the partitions:
``attention_qkv`` makes them from token-major rows with one Tensor-engine transpose per 128 rows and head pair
(and a PSUM copy each, mostly on the busy Scalar engine). Here the projection's matmuls produce them in that
orientation directly (weights stationary, LN(x)^T moving), so the attention kernel only loads them: one DMA per
head pair for q^T and one for k^T per batch element ([128 features, seq] rows of seq * 2 bytes), V in full
rows. The output is token-major (tokens, heads * head_dim), as ``attention_qkv``'s (ready for the projection).
"""

from __future__ import annotations

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import DEFAULT_EVICT, PMAX, _chunks, _Evict, _Group, _pipelined, _query_tiles, heads_per_group


def _heads_from_split(hg, group, qkT, v_sb, out_sb, col0, seq, d, hd, pe, strategy, evict):
    """One group of heads: their q^T and k^T rows loaded straight from ``qkT`` (columns ``col0 ..`` are this batch
    element's tokens), V read from ``v_sb`` in place, outputs written into the heads' columns of ``out_sb``.
    Heads that fit the partitions together (``share`` of them, share * d <= 128) come in one load and share one
    division (``_Group.pair``), as in ``attention_qkv``."""
    q_tiles = _query_tiles(seq)
    i_q = nl.arange(PMAX)[None, :]
    i_d = nl.arange(d)[None, :]
    share = max(s for s in range(1, group + 1) if group % s == 0 and s * d <= PMAX)
    parts, width = group // share, share * d
    i_wp, i_s = nl.arange(width)[:, None], nl.arange(seq)[None, :]
    buf = _Group(group * len(q_tiles), seq, d, pe, pe, _Evict(evict), strategy == "resident", pair=share)
    # q^T padded to whole 128-column query tiles (the ragged tile's extra columns are never stored: its rows are
    # masked), k^T exactly seq columns
    qT = nl.ndarray((parts, nl.par_dim(width), len(q_tiles) * PMAX), dtype=pe)
    kT = nl.ndarray((parts, nl.par_dim(width), seq), dtype=pe)
    for part in range(parts):
        f0 = (hg * parts + part) * width
        nisa.dma_copy(dst=qT[part, i_wp, i_s], src=qkT[f0 + i_wp, col0 + i_s])
        nisa.dma_copy(dst=kT[part, i_wp, i_s], src=qkT[hd + f0 + i_wp, col0 + i_s])
    items = []
    for part in range(parts):
        h0 = hg * group + part * share
        for t, (q0, rows, q_cols_ok) in enumerate(q_tiles):  # tile-major within a part: a pair is consecutive
            for g in range(share):
                h = h0 + g
                i_k = g * d + nl.arange(d)[:, None]
                items.append(dict(
                    qT=lambda n, part=part, q0=q0, i_k=i_k: qT[part, i_k, q0 + i_q],
                    kT=lambda r, c, part=part, g=g: kT[part, g * d + r, c], rows=rows, q_cols_ok=q_cols_ok,
                    dst=lambda r, c, t=t, h=h: out_sb[t, r, h * d + c],
                    pair_dst=lambda r, g3, c, t=t, h0=h0: out_sb[t, r, h0 * d + g3 * d + c],
                    v_tile=lambda j, size, h=h: v_sb[j, nl.arange(size)[:, None], h * d + i_d]))
    _pipelined(buf, items, strategy)


@nki.jit
def attention_split_kernel(qkT, v, num_heads=1, seq=1, strategy="resident", evict=DEFAULT_EVICT):
    """``softmax(q k^T) v`` per head from ``qkT`` (2 * hd, batch * seq) and ``v`` (batch * seq, hd), the scale
    already in k; out (batch * seq, hd)."""
    tokens, hd = v.shape
    d = hd // num_heads
    batch = tokens // seq
    out = nl.ndarray((tokens, hd), dtype=v.dtype, buffer=nl.shared_hbm)
    q_tiles, k_tiles = _query_tiles(seq), _chunks(seq, PMAX)
    group = heads_per_group(num_heads, len(q_tiles), seq, 2 if str(v.dtype) == "bfloat16" else 4)
    i_p, i_hd = nl.arange(PMAX)[:, None], nl.arange(hd)[None, :]
    for b in nl.affine_range(batch):
        col0 = b * seq
        v_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), hd), dtype=v.dtype)
        for j, (k0, _) in enumerate(k_tiles):
            nisa.dma_copy(dst=v_sb[j, i_p, i_hd], src=v[col0 + k0 + i_p, i_hd], mask=k0 + i_p < seq)
        out_sb = nl.ndarray((len(q_tiles), nl.par_dim(PMAX), hd), dtype=v.dtype)
        for hg in nl.affine_range(num_heads // group):
            _heads_from_split(hg, group, qkT, v_sb, out_sb, col0, seq, d, hd, v.dtype, strategy, evict)
        for t, (q0, rows, _) in enumerate(q_tiles):
            nl.store(out[col0 + q0 + i_p, i_hd], value=out_sb[t, i_p, i_hd], mask=rows)
    return out
