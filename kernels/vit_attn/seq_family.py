"""Attention with the sequence length symbolic: the flash schedule the shape families over S publish past 512 tokens
(kernel.toml's families after the six models'; up to 512 they run ``seq_strip.py``'s resident strip, and
``strategy="flash"`` gets this one there too), for all three layouts: (B, H, S, D) with
B, H and D symbolic too (``attention_any_seq``), the fused projection's (B, S, 3 * H * D) with B and the width
symbolic (``attention_qkv_any_seq``) and the split layout of one sequence (``attention_split_any_seq``); they
differ only in how a head's q^T, k^T and v tiles come in (``_by_transpose``, ``_by_rows``) and where its output
goes, so per (batch element, head) they compute the same numbers bit for bit. (kernel.toml publishes qkv's and
the split layout's families through their per-head views, ``head_views.py``, which run ``_flash_heads`` with
every dimension symbolic; the two functions here serve traces over the width and the token count, one head count
at a time.)

The concrete kernel (``kernel.py``) unrolls its query tiles, key tiles and score chunks in Python and chooses the
resident strip or flash by the sequence length; none of that can be traced with a symbolic S. So one schedule
runs every S, as ``kernels/linear/widths.py`` does for widths: on-chip tensors of fixed size ([128, 512] score
blocks, [D, 512] key blocks), loops over ``ceil(S / 256)`` pairs of query tiles and ``ceil(S / 512)`` key blocks
(the pair's q^T in one transfer, its outputs out in one, each block's k^T and V once for the pair, in one transfer
each), and masks for the ragged last ones:

* flash online softmax over key blocks of 512 (running max ``m``, sum ``l``, output ``o``; ``alpha = exp(m_old -
  m_new)``), whatever S is: no SBUF size depends on S, so one family covers S in 1..16384;
* the scores of keys past S are set to -3e38 (a masked memset of the SBUF copy of the block), so their exp is 0;
  V's rows past S are zero, so a key past S adds nothing to ``P V``;
* query rows past S are masked on every op that writes them and on the store.
"""

from __future__ import annotations

import numpy as np

import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128  # partitions (reference/nki.md §1.2 TC#1)
BLOCK = 512  # keys per block: one PSUM bank of fp32 scores (§1.2 TC#2)
DMAX = 128  # head_dim on the partitions of q^T and k^T (the launcher's limit)
NEG = -3.0e38  # the score of a key past S: exp(NEG - m) is 0 for every finite m
# Query tiles whose key blocks one loop iteration interleaves, sharing the block's k^T and V loads (PSUM: a score
# bank, a transpose bank and an accumulator per tile, 3 x TILES <= 8 banks, reference/nki.md §1.2 TC#2). Modelled
# on trn2 bf16 (benchmarks/family_instances.py), B x H x S x D 1x12x197x64 / 1x8x4096x64: one tile per iteration
# 233.0 / 14206.1 us, 2 tiles 194.5 / 10747.5, 3 tiles 203.2 / 10081.0, 4 tiles 210.1 / 9653.8 (short sequences
# pay for the tiles past S); measured before loop-body tiles rotated over the head loop (passes/allocate.py), with
# which 2 tiles are 183.4 / 10747.5
TILES = 2
SPAN = TILES * PMAX  # the query rows of one iteration: their q^T comes in by one transfer, their outputs go by one
# The engine of every PSUM -> SBUF copy of P^T (``_key_block``'s activation copy): what a call's ``evict`` must name
# (round robin) to get this schedule; the launcher refuses other engines over a symbolic S (``_family_evict``).
COPY_ENGINES = ("scalar",)


def attention_any_seq(q, k, v, out, scale, strategy="flash"):
    """``out[b, h] = softmax(scale * q[b, h] k[b, h]^T) v[b, h]`` for symbolic B, H, S and D (<= 128): on-chip
    tensors sized for D = 128, the head-dim rows and columns past D zero (so they add nothing to the scores) or
    masked. ``strategy``: as ``seq_strip.schedule`` decides ("resident": its score strip, every S of the family at
    most 512)."""
    from . import seq_strip  # (here: seq_strip imports this module's constants)

    batch, heads, seq, d = q.shape
    q_of, k_of, v_of, o_of = ((lambda b, h, r, c, t=t: t[b, h, r, c]) for t in (q, k, v, out))
    if seq_strip.schedule(seq, strategy) == "resident":
        seq_strip.strip_heads(batch, heads, seq, d, q.dtype, scale_column(scale, d),
                              seq_strip.by_transpose(q_of, seq, d, heads), seq_strip.by_transpose(k_of, seq, d, heads),
                              v_of, o_of)  # fmt: skip
        return
    _flash_heads(batch, lambda: nl.affine_range(heads), seq, d, q.dtype, scale_column(scale, d),
                 _by_transpose(q_of, seq, d, SPAN),
                 _by_transpose(k_of, seq, d, BLOCK), v_of, o_of)  # fmt: skip


def attention_qkv_any_seq(qkv, out, num_heads, scale):
    """The same from the fused projection's ``qkv`` (B, S, 3 * num_heads * D) into ``out`` (B, S, num_heads * D),
    B, S and the width symbolic, ``num_heads`` a Python int: head h's q, k and v are columns ``h * D``,
    ``(num_heads + h) * D`` and ``(2 * num_heads + h) * D`` of the rows. Those offsets are affine only for a
    concrete h (a loop index times the symbol D is not), so the heads are unrolled in Python, outside the batch
    loop (the verifier asks that the writes to one tensor inside a loop share their symbol terms,
    verify/family.py ``_offsets_cancel``); per (batch element, head) it is ``attention_any_seq``'s schedule,
    instruction for instruction, so the numbers are the same bit for bit."""
    batch, seq, width = qkv.shape
    d = width // (3 * num_heads)
    hd = num_heads * d

    def cols(base):
        return lambda b, h, r, c: qkv[b, r, base + h * d + c]

    scale = scale_column(scale, d)  # (once, not per unrolled head)
    for h in range(num_heads):  # outermost: each head's stores to ``out`` are the only ones in its batch loop
        _flash_heads(batch, lambda h=h: [h], seq, d, qkv.dtype, scale, _by_transpose(cols(0), seq, d, SPAN),
                     _by_transpose(cols(hd), seq, d, BLOCK), cols(2 * hd),
                     lambda b, h, r, c: out[b, r, h * d + c])  # fmt: skip


def attention_split_any_seq(qkT, v, out, num_heads):
    """The same from the split layout (``split_layout.py``) of one sequence of S tokens, S symbolic: ``qkT`` (2 *
    num_heads * D, S) holds q^T and (scale * k)^T, so both come in by plain loads of head h's D feature rows, v
    (S, num_heads * D), out likewise. D is concrete here (the manifest cannot tie qkT's rows to twice v's
    columns), so the heads are an affine loop; per head it is ``attention_any_seq``'s schedule with scale 1."""
    seq, hd = v.shape
    d = hd // num_heads

    def features(base):
        return lambda b, h, r, c: qkT[base + h * d + r, c]

    _flash_heads(1, lambda: nl.affine_range(num_heads), seq, d, v.dtype, 1.0, _by_rows(features(0), seq, d, SPAN),
                 _by_rows(features(hd), seq, d, BLOCK), lambda b, h, r, c: v[r, h * d + c],
                 lambda b, h, r, c: out[r, h * d + c])  # fmt: skip


def _by_transpose(of, seq, d, size):
    """``load(b, h, t0)``: head h's [128, size] transposed tile (head-dim rows, tokens t0.. as columns) from its
    row-major HBM rows ``of(b, h, rows, cols)``, by DMA transpose; the tokens past S and the head-dim columns past D
    are masked (left as the tile's zeros)."""
    i_t, i_d = nl.arange(size)[:, None], nl.arange(DMAX)[None, :]
    return lambda b, h, t0: nl.load_transpose2d(of(b, h, t0 + i_t, i_d), mask=(t0 + i_t < seq) & (i_d < d))


def _by_rows(of, seq, d, size):
    """The same tile from a layout that holds it transposed already (``of(b, h, features, tokens)``): a plain load."""
    i_f, i_t = nl.arange(DMAX)[:, None], nl.arange(size)[None, :]
    return lambda b, h, t0: nl.load(of(b, h, i_f, t0 + i_t), mask=(i_f < d) & (t0 + i_t < seq))


def _flash_heads(batch, heads, seq, d, pe, scale, q_T, k_T, v_of, o_of):
    """The schedule of every family over S: per batch element, head (``heads()``: an affine loop or unrolled) and
    pair of query tiles (``TILES``), flash over key blocks of 512, each block's k^T and V loaded once for both tiles
    and the tiles' chains interleaved in program order (the in-order engines work on one tile while the other
    waits, as the concrete flash does). ``q_T(b, h, t0)`` and ``k_T`` load head h's q^T and k^T tiles from token t0
    on (``_by_transpose``, ``_by_rows``); ``v_of(b, h, rows, cols)`` and ``o_of`` are the HBM accesses of its rows
    of v and of the output; ``scale`` a number or a [128, 1] fp32 column (``scale_column``). A pair's second tile
    past S (an odd tile count) is masked out everywhere."""
    i_p, i_d = nl.arange(PMAX)[:, None], nl.arange(DMAX)[None, :]
    i_dp, i_q = nl.arange(DMAX)[:, None], nl.arange(PMAX)[None, :]
    i_one = nl.arange(1)[None, :]
    i_s = nl.arange(SPAN)[None, :]
    i_p3, i_u3, i_d3 = nl.arange(PMAX)[:, None, None], nl.arange(TILES)[None, :, None], nl.arange(DMAX)[None, None, :]
    for b in nl.affine_range(batch):
        for h in heads():
            for qt in nl.affine_range((seq + SPAN - 1) // SPAN):
                # q^T of the iteration's query tiles in one transfer ([128, 256]: one fixed cost, not two, §3.4)
                qT = nl.ndarray((nl.par_dim(DMAX), SPAN), dtype=pe)
                qT[i_dp, i_s] = nisa.memset((DMAX, SPAN), 0, pe)
                qT[i_dp, i_s] = q_T(b, h, qt * SPAN)
                o_sb = nl.ndarray((nl.par_dim(PMAX), TILES * DMAX), dtype=pe)
                tiles = []
                for u in range(TILES):
                    q0 = qt * SPAN + u * PMAX
                    rows = q0 + i_p < seq
                    m = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
                    m[i_p, i_one] = nisa.memset((PMAX, 1), NEG, nl.float32)
                    l_sum = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
                    l_sum[i_p, i_one] = nisa.memset((PMAX, 1), 0.0, nl.float32)
                    o = nl.ndarray((nl.par_dim(PMAX), DMAX), dtype=nl.float32)
                    o[i_p, i_d] = nisa.memset((PMAX, DMAX), 0.0, nl.float32)
                    tiles.append((q0, rows, qT[i_dp, u * PMAX + i_q], m, l_sum, o))
                for kb in nl.sequential_range((seq + BLOCK - 1) // BLOCK):
                    _key_block(lambda k0, b=b, h=h: k_T(b, h, k0), lambda r, c, b=b, h=h: v_of(b, h, r, c),
                               pe, kb * BLOCK, seq, d, scale, tiles)  # fmt: skip
                for u, (_, rows, _, _, l_sum, o) in enumerate(tiles):
                    o_sb[i_p, u * DMAX + i_d] = nisa.tensor_scalar(o[i_p, i_d], np.divide, l_sum[i_p, i_one], dtype=pe,
                                                                   mask=rows & (i_d < d))  # fmt: skip
                r3 = qt * SPAN + i_u3 * PMAX + i_p3  # both tiles' outputs in one transfer
                nl.store(o_of(b, h, r3, i_d3), value=o_sb[i_p3, i_u3 * DMAX + i_d3], mask=(r3 < seq) & (i_d3 < d))


def scale_column(scale, d):
    """The scale as ``_key_block`` applies it: a Python number as is; None as ``1 / sqrt(D)`` computed on chip
    (``_inv_sqrt``); a runtime scale (the kernel's [1] fp32 HBM parameter the loader fills from the caller's
    ``scale=``, the manifest's ``scalars``: one IR for every scale) on every partition, as a [128, 1] fp32 column."""
    if scale is None:
        return _inv_sqrt(d)
    if isinstance(scale, float | int):
        return scale
    i_p, i_one = nl.arange(PMAX)[:, None], nl.arange(1)[None, :]
    value = nl.load(scale.reshape((1, 1)))  # [1, 1]: the operand below broadcasts it across the partitions
    ones = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
    ones[i_p, i_one] = nisa.memset((PMAX, 1), 1.0, nl.float32)
    col = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
    col[i_p, i_one] = nl.multiply(ones[i_p, i_one], value, dtype=nl.float32)  # 1 * s: s exactly
    return col


def _inv_sqrt(d):
    """``1 / sqrt(D)`` for a symbolic D, as a [128, 1] fp32 column (the activation's per-partition scale): D is the
    sum of a row of ones masked to its first D columns (a symbol reaches the chip only through masks)."""
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(DMAX)[None, :]
    ones = nl.ndarray((nl.par_dim(PMAX), DMAX), dtype=nl.float32)
    ones[i_p, i_c] = nisa.memset((PMAX, DMAX), 0.0, nl.float32)
    ones[i_p, i_c] = nisa.memset((PMAX, DMAX), 1.0, nl.float32, mask=i_c < d)
    count = nisa.tensor_reduce(np.add, ones[i_p, i_c], axis=(1,), keepdims=True)
    col = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
    col[i_p, nl.arange(1)[None, :]] = nisa.activation(nl.rsqrt, count)
    return col


def _key_block(k_T, v_rows, pe, k0, seq, d, scale, tiles):
    """One online-softmax step over keys ``k0 .. k0 + 511`` (those past S masked out) for each query tile of
    ``tiles`` ((q0, rows, q^T, m, l, o) each); ``k_T(k0)`` loads the head's k^T tile, ``v_rows(rows, cols)`` is its
    HBM access of v. Each stage runs for every tile before the next stage (interleaved chains)."""
    i_p, i_d = nl.arange(PMAX)[:, None], nl.arange(DMAX)[None, :]
    i_dp, i_q = nl.arange(DMAX)[:, None], nl.arange(PMAX)[None, :]
    i_c, i_one = nl.arange(BLOCK)[None, :], nl.arange(1)[None, :]
    # (scale * K)^T of the block: [128, 512], the keys past S and the head-dim rows past D zero
    raw = nl.ndarray((nl.par_dim(DMAX), BLOCK), dtype=pe)
    raw[i_dp, i_c] = nisa.memset((DMAX, BLOCK), 0, pe)
    raw[i_dp, i_c] = k_T(k0)
    # V's 512 rows of the block in one transfer ([128 keys, 4, 128]: one DMA fixed cost, not four, reference/nki.md
    # §3.4), issued with k^T's, before the scores, so both transfers run while the engines compute
    n_sub = BLOCK // PMAX
    i_k3, i_j3, i_d3 = nl.arange(PMAX)[:, None, None], nl.arange(n_sub)[None, :, None], nl.arange(DMAX)[None, None, :]
    v_sb = nl.ndarray((nl.par_dim(PMAX), n_sub * DMAX), dtype=pe)
    v_sb[i_p, nl.arange(n_sub * DMAX)[None, :]] = nisa.memset((PMAX, n_sub * DMAX), 0, pe)
    keys3 = k0 + i_j3 * PMAX + i_k3
    v_sb[i_k3, i_j3 * DMAX + i_d3] = nl.load(v_rows(keys3, i_d3), mask=(keys3 < seq) & (i_d3 < d))
    factor = float(scale) if isinstance(scale, float | int) else scale[i_dp, 0]
    kT = nisa.activation(nl.copy, raw[i_dp, i_c], scale=factor, dtype=pe)
    steps = []
    for _, rows, qT, m, _, _ in tiles:  # scores and the new running max
        s_ps = nl.ndarray((nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
        s_ps[i_p, i_c] = nisa.nc_matmul(qT, kT, mask=rows)
        s = nl.ndarray((nl.par_dim(PMAX), BLOCK), dtype=nl.float32)
        s[i_p, i_c] = nisa.tensor_copy(s_ps[i_p, i_c], dtype=nl.float32, mask=rows)
        s[i_p, i_c] = nisa.memset((PMAX, BLOCK), NEG, nl.float32, mask=k0 + i_c >= seq)
        block_max = nisa.tensor_reduce(np.max, s[i_p, i_c], axis=(1,), keepdims=True, mask=rows)
        m_new = nl.maximum(m[i_p, i_one], block_max, mask=rows)
        steps.append((s, m_new))
    probs = []
    for (_, rows, _, m, l_sum, _), (s, m_new) in zip(tiles, steps):  # exp, the row sums, the rescaling factor
        neg_new = nisa.tensor_scalar(m_new, np.multiply, -1.0, mask=rows)
        alpha = nisa.activation(np.exp, m[i_p, i_one], bias=neg_new, mask=rows)
        sums = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
        p = nl.ndarray((nl.par_dim(PMAX), BLOCK), dtype=pe)
        p[i_p, i_c] = nisa.activation(np.exp, s[i_p, i_c], bias=neg_new, reduce_op=np.add,
                                      reduce_res=sums[i_p, i_one], mask=rows, dtype=pe)  # fmt: skip
        l_sum[i_p, i_one] = nisa.scalar_tensor_tensor(data=l_sum[i_p, i_one], op0=np.multiply, operand0=alpha,
                                                      op1=np.add, operand1=sums[i_p, i_one], mask=rows)  # fmt: skip
        m[i_p, i_one] = nisa.tensor_copy(m_new, mask=rows)
        probs.append((p, alpha))
    for (_, rows, _, _, _, o), (p, alpha) in zip(tiles, probs):  # P V, and o rescaled and added
        # P^T: four [128, 128] transposes into one PSUM bank, copied to SBUF by one instruction
        t_ps = nl.ndarray((nl.par_dim(PMAX), BLOCK), dtype=pe, buffer=nl.psum)
        for j in range(n_sub):
            t_ps[i_p, j * PMAX + i_q] = nisa.nc_transpose(p[i_p, j * PMAX + i_q])
        pT = nisa.activation(nl.copy, t_ps[i_p, i_c], dtype=pe)  # (COPY_ENGINES: the Scalar engine)
        acc = nl.ndarray((nl.par_dim(PMAX), DMAX), dtype=nl.float32, buffer=nl.psum)
        for j in range(n_sub):
            product = nisa.nc_matmul(pT[i_p, j * PMAX + i_q], v_sb[i_p, j * DMAX + i_d])
            if j == 0:
                acc[i_p, i_d] = product
            else:
                acc[i_p, i_d] += product
        o[i_p, i_d] = nisa.scalar_tensor_tensor(data=o[i_p, i_d], op0=np.multiply, operand0=alpha, op1=np.add,
                                                operand1=acc[i_p, i_d], mask=rows)  # fmt: skip
