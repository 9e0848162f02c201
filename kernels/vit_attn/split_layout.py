"""vit-attn from the split layout that a fused QKV projection writes for it (``linear``'s ``layernorm_qkv``):

* ``qkT`` (2 * heads * head_dim, tokens): q^T and (scale * k)^T, features on the rows, the tokens of all batch
  elements (batch-major) along the columns; the softmax scale is already applied to k by the projection;
* ``v`` (tokens, heads * head_dim): V token-major, as the P V matmul streams it.

The Tensor engine contracts over the partitions, so attention needs q and k with head_dim on the partitions:
``attention_qkv`` makes them from token-major rows with one Tensor-engine transpose per 128 rows and head pair
(and a PSUM copy each, mostly on the busy Scalar engine). Here the projection's matmuls produce them in that
orientation directly (weights stationary, LN(x)^T moving), so the attention kernel only loads them: per batch
element one DMA for the q^T of every head pair and one for their k^T ([128 features, pairs, seq]: seq * 2 bytes
per pair and partition, one fixed cost for all pairs, reference/nki.md §3.4), V's full key tiles in one and
the output's full query tiles out in one. The output is token-major (tokens, heads * head_dim), as
``attention_qkv``'s (ready for the projection).
"""

from __future__ import annotations

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import DEFAULT_EVICT, PMAX, _chunks, _Evict, _Group, _pipelined, _query_tiles, _static, heads_per_group


def _load_qk(hg, group, qkT, col0, seq, d, hd, pe):
    """Head group ``hg``'s q^T and k^T rows from ``qkT`` (columns ``col0 ..`` are the batch element's tokens): every
    part's q^T rows in one transfer, and every part's k^T rows in one ([width, parts, seq]: a partition moves
    parts * seq * 2 bytes, where one transfer per part would pay the ~1.3 us fixed cost for seq * 2 bytes,
    reference/nki.md §3.4). q^T is padded to whole 128-column query tiles (the ragged tile's extra columns are
    never stored: its rows are masked), k^T is exactly seq columns."""
    share = max(s for s in range(1, group + 1) if group % s == 0 and s * d <= PMAX)
    parts, width = group // share, share * d
    qT = nl.ndarray((parts, nl.par_dim(width), len(_query_tiles(seq)) * PMAX), dtype=pe)
    kT = nl.ndarray((parts, nl.par_dim(width), seq), dtype=pe)
    i_w3, i_n3, i_s3 = nl.arange(width)[:, None, None], nl.arange(parts)[None, :, None], nl.arange(seq)[None, None, :]
    f3 = (hg * parts + i_n3) * width + i_w3
    nisa.dma_copy(dst=qT[i_n3, i_w3, i_s3], src=qkT[f3, col0 + i_s3])
    nisa.dma_copy(dst=kT[i_n3, i_w3, i_s3], src=qkT[hd + f3, col0 + i_s3])
    return qT, kT


def _heads_from_split(hg, group, qkT, v_sb, out_sb, col0, seq, d, hd, pe, strategy, evict, loaded=None):
    """One group of heads: their q^T and k^T rows (``loaded``, or loaded here by ``_load_qk``), V read from ``v_sb``
    in place, outputs written into the heads' columns of ``out_sb``. Heads that fit the partitions together
    (``share`` of them, share * d <= 128) come in one load and share one division (``_Group.pair``), as in
    ``attention_qkv``."""
    q_tiles = _query_tiles(seq)
    i_q = nl.arange(PMAX)[None, :]
    i_d = nl.arange(d)[None, :]
    share = max(s for s in range(1, group + 1) if group % s == 0 and s * d <= PMAX)
    parts = group // share
    buf = _Group(group * len(q_tiles), seq, d, pe, pe, _Evict(evict), strategy == "resident", pair=share)
    qT, kT = loaded or _load_qk(hg, group, qkT, col0, seq, d, hd, pe)
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
                    pair_rows=q0 + nl.arange(PMAX)[:, None, None] < seq,
                    dst=lambda r, c, t=t, h=h: out_sb[t, r, h * d + c],
                    pair_dst=lambda r, g3, c, t=t, h0=h0: out_sb[t, r, h0 * d + g3 * d + c],
                    v_tile=lambda j, size, h=h: v_sb[j, nl.arange(size)[:, None], h * d + i_d]))
    _pipelined(buf, items, strategy)


@nki.jit
def attention_split_kernel(qkT, v, num_heads=1, seq=1, strategy="resident", evict=DEFAULT_EVICT):
    """``softmax(q k^T) v`` per head from ``qkT`` (2 * hd, batch * seq) and ``v`` (batch * seq, hd), the scale
    already in k; out (batch * seq, hd). ``seq=None``: the tokens are one sequence."""
    tokens, hd = v.shape
    out = nl.ndarray((tokens, hd), dtype=v.dtype, buffer=nl.shared_hbm)
    seq = tokens if seq is None else seq
    if _static(seq) is None:  # a family over the token count of one sequence (seq_family.py)
        from .seq_family import attention_split_any_seq

        attention_split_any_seq(qkT, v, out, num_heads)
        return out
    d = hd // num_heads
    batch = tokens // seq
    q_tiles, k_tiles = _query_tiles(seq), _chunks(seq, PMAX)
    group = heads_per_group(num_heads, len(q_tiles), seq, 2 if str(v.dtype) == "bfloat16" else 4)
    for b in nl.affine_range(batch):
        # the element's loads first, then its heads and its store (measured, ViT-B/16 batch 8 trn2: 84.0 us; q^T and
        # k^T loaded inside the head loop after out_sb's allocation, 115.4 us)
        col0 = b * seq
        v_sb, qk = _load_element(col0, qkT, v, k_tiles, group, num_heads, seq, d, hd)
        out_sb = nl.ndarray((len(q_tiles), nl.par_dim(PMAX), hd), dtype=v.dtype)
        for hg in nl.affine_range(num_heads // group):
            _heads_from_split(hg, group, qkT, v_sb, out_sb, col0, seq, d, hd, v.dtype, strategy, evict, qk)
        _tiles_dma(out_sb, out, col0, seq, hd, load=False)
    return out


def _tiles_dma(sb, hbm, row0, seq, hd, load):
    """Rows ``row0 .. row0 + seq`` of ``hbm`` (tokens, hd) to or from ``sb`` (tiles, 128, hd): the full 128-row
    tiles in one transfer ([128, tiles, hd]: one fixed cost, reference/nki.md §3.4), a ragged last tile in its
    own, masked."""
    full, rest = divmod(seq, PMAX)
    i_p3, i_t3, i_hd3 = nl.arange(PMAX)[:, None, None], nl.arange(full)[None, :, None], nl.arange(hd)[None, None, :]
    pieces = [(sb[i_t3, i_p3, i_hd3], hbm[row0 + i_t3 * PMAX + i_p3, i_hd3], None)] if full else []
    if rest:
        i_p, i_hd = nl.arange(PMAX)[:, None], nl.arange(hd)[None, :]
        pieces.append((sb[full, i_p, i_hd], hbm[row0 + full * PMAX + i_p, i_hd], i_p < rest))
    for on_chip, rows, mask in pieces:
        if load:
            nisa.dma_copy(dst=on_chip, src=rows, mask=mask)
        else:
            nisa.dma_copy(dst=rows, src=on_chip, mask=mask)


def _load_element(col0, qkT, v, k_tiles, group, num_heads, seq, d, hd):
    """One batch element's inputs (its tokens are columns ``col0 ..`` of ``qkT`` and rows ``col0 ..`` of ``v``): V's
    key tiles (``_tiles_dma``) and, when the heads are one group, their q^T and k^T (``_load_qk``; else None: each
    group loads its own)."""
    v_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), hd), dtype=v.dtype)
    _tiles_dma(v_sb, v, col0, seq, hd, load=True)
    qk = _load_qk(0, group, qkT, col0, seq, d, hd, v.dtype) if group == num_heads else None
    return v_sb, qk
