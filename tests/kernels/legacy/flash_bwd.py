"""Flash-attention backward in the legacy API, in the style of AWS's reference ``flash_attn_bwd``
(reference/nki.md §4.2 (c)): GQA (the query heads of a group share one KV head), a causal mask, a sliding window,
attention sinks, dropout, a frozen ``FlashConfig`` argument, the per-tile work in a ``@nki.jit(mode='trace')``
helper inlined into the kernel, and ``affine_range`` / ``sequential_range`` loops.

Layouts as AWS's: ``q``, ``o``, ``dy`` are ``[bs, n_heads, d, seq]``, ``k``, ``v`` are ``[bs, kv_heads, d, seq]``,
``lse`` is ``[bs, n_heads, 128, seq // 128]`` (query row ``t * 128 + p`` at ``[..., p, t]``), ``seed`` a ``[1]``
int32 tensor (read when ``dropout_p > 0``), ``sinks`` ``[n_heads]`` fp32 logits or None. Launched
``flash_attn_bwd[bs, kv_heads]``; returns ``dq, dk, dv`` in the layouts of ``q, k, v``, and with sinks also
``dsinks`` ``[bs, n_heads]`` (each batch's share: the caller sums over the batch).

* **Sliding window** (``sliding_window=W > 0``): query ``q`` sees keys ``k`` with ``q - k < W`` (and ``k <= q``
  under the causal mask); key tiles wholly outside the window are masked off as the causal ones are.
* **Sinks**: a per-head logit in every softmax denominator, ``P_ij = exp(s_ij - lse_i)`` with
  ``lse_i = log(sum_j exp(s_ij) + exp(sink))`` (the forward's lse). The sink takes no value, so dQ, dK, dV are
  unchanged given that lse, and ``dsink = -sum_i exp(sink - lse_i) * D_i``.
* **Dropout** (``dropout_p > 0``), as AWS's kernels draw it: each (batch, head, query tile, key tile) pair seeds
  the generator with ``seed + offset`` (``nl.random_seed``) and drops elements of ``P`` with ``nl.dropout``; the
  forward drew the same mask the same way. dV uses ``P * mask / (1 - p)``; re-seeding with the same value draws
  the mask again for ``dP = (dO V^T) * mask / (1 - p)``.

Steps (AWS's docstring): 1. D = rowsum(dO * O); 2. recompute P = exp(scale * Q^T K - lse) under the mask; 3. dV +=
P^T dO; 4. dS = P * (dO V^T - D); 5. dK += scale * dS^T Q, dQ += scale * dS K. Scores are [128 queries,
``k_tile_size`` keys] tiles; each key tile keeps dK^T and dV^T [d, k_tile_size] in PSUM while every query tile of
every head in its group adds to them; dQ^T accumulates in SBUF across the key tiles, 128 keys (one transposed block
of dS) at a time.
"""

import math
from dataclasses import dataclass

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@dataclass(frozen=True)
class FlashConfig:  # (AWS passes use_causal_mask / mixed_precision as arguments; this kernel keeps them here)
    k_tile_size: int = 512  # keys per score tile: [128 queries, 512 keys] of fp32 is one PSUM bank (§1.1)
    causal: bool = True
    mixed_precision: bool = True  # Tensor-engine operands in bf16; every accumulation stays fp32


Q_TILE = 128  # query rows per tile: the partitions of a score tile
K_TILE_BWD = 128  # keys per transposed block (the Tensor engine transposes at most 128 x 128)


def _live(i_q, i_k, K, causal, sliding_window):
    """The mask (over two loop variables) keeping the (query tile, key tile) pairs with a key some query of the
    tile sees; None when every pair has one. Tiles are aligned (K is a multiple of Q_TILE), so under the causal
    mask a query tile that starts before the key tile sees none of its keys, as in AWS's kernel; under a window
    of W the tile's first query must be less than W past the tile's last key."""
    live = (i_q * Q_TILE >= i_k * K) if causal else None
    if sliding_window:
        in_window = i_q * Q_TILE < i_k * K + K - 1 + sliding_window
        live = in_window if live is None else live & in_window
    return live


@nki.jit(mode="trace")
def _flash_attn_bwd_core(q_tile, q_rows, k_tile, k_rows, v_tile, dy_tile, dy_rows, neg_lse, dy_o_sum,
                         dk_psum, dv_psum, dq_acc, i_q, i_k, scale, config, kernel_dtype,
                         sliding_window=0, dropout_p=0.0, dropout_p_tensor=None, seed_local=None,
                         seed_offset=None):  # fmt: skip
    """One (query tile, key tile) pair. ``q_tile``, ``dy_tile`` are [d, 128], ``k_tile``, ``v_tile`` [d, K];
    ``q_rows``, ``dy_rows`` [128, d], ``k_rows`` [K / 128, 128, d]; ``neg_lse`` and ``dy_o_sum`` are the query
    tile's [128, 1] columns. dK^T, dV^T [d, K] (PSUM) and dQ^T [d, 128] (SBUF) are accumulated. With dropout,
    ``seed_local`` is the [1, 1] seed, ``seed_offset`` this pair's offset and ``dropout_p_tensor`` [128, 1]."""
    K = config.k_tile_size
    live = _live(i_q, i_k, K, config.causal, sliding_window)
    s_psum = nisa.nc_matmul(q_tile, k_tile, mask=live)  # [128 q, K] = Q^T K
    i_p, i_f = nl.mgrid[0:Q_TILE, 0:K]
    neg = nl.finfo(nl.float32).min
    if config.causal:
        s = nisa.affine_select(i_q * Q_TILE + i_p >= i_k * K + i_f, s_psum, neg, dtype=nl.float32, mask=live)
    else:
        s = nl.copy(s_psum, dtype=nl.float32, mask=live)
    if sliding_window:
        s = nisa.affine_select(i_k * K + i_f + sliding_window > i_q * Q_TILE + i_p, s, neg, dtype=nl.float32,
                               mask=live)  # fmt: skip
    p = nisa.activation(np.exp, s, bias=neg_lse, scale=scale, dtype=nl.float32, mask=live)  # exp(scale * s - lse)
    if dropout_p > 0.0:
        # AWS's scheme: seed the generator with seed + this pair's offset, draw the forward's mask again
        offset_seed = nl.add(seed_local, seed_offset, mask=live)
        nl.random_seed(seed=offset_seed, mask=live)
        p_drop = nl.dropout(p, rate=dropout_p_tensor[i_p, 0], mask=live)
        p_drop = nl.multiply(p_drop, 1 / (1 - dropout_p), mask=live)
    else:
        p_drop = p
    dv_psum += nisa.nc_matmul(dy_rows, nl.static_cast(p_drop, kernel_dtype), mask=live)  # [d, K] += dO^T P
    dp_psum = nisa.nc_matmul(dy_tile, v_tile, mask=live)  # [128 q, K] = dO V^T
    if dropout_p > 0.0:
        nl.random_seed(seed=offset_seed, mask=live)  # the same seed: the same mask
        dp = nl.multiply(nl.dropout(dp_psum, rate=dropout_p_tensor[i_p, 0], mask=live), 1 / (1 - dropout_p),
                         mask=live)  # fmt: skip
    else:
        dp = dp_psum
    ds = nisa.scalar_tensor_tensor(data=dp, op0=np.subtract, operand0=dy_o_sum, op1=np.multiply, operand1=p,
                                   dtype=kernel_dtype, mask=live)  # fmt: skip
    dk_psum += nisa.nc_matmul(q_rows, ds, mask=live)  # [d, K] += Q dS
    i_s, i_t = nl.mgrid[0:Q_TILE, 0:K_TILE_BWD]
    for b in nl.affine_range(K // K_TILE_BWD):
        ds_t = nl.copy(nisa.nc_transpose(ds[i_s, b * K_TILE_BWD + i_t], mask=live), dtype=kernel_dtype, mask=live)
        dq_acc[...] += nisa.nc_matmul(k_rows[b], ds_t, mask=live)  # [d, 128 q] += K dS^T


@nki.jit
def flash_attn_bwd(q, k, v, o, dy, lse, seed=None, sinks=None, config=FlashConfig(), softmax_scale=None,
                   dropout_p=0.0, sliding_window=0):  # fmt: skip
    b, kv_h = nl.program_id(0), nl.program_id(1)
    _, n_heads, d, seqlen = q.shape
    group = n_heads // k.shape[1]
    K = config.k_tile_size
    assert d <= 128 and seqlen % K == 0 and K % K_TILE_BWD == 0 and n_heads % k.shape[1] == 0
    n_q, n_k = seqlen // Q_TILE, seqlen // K
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    kernel_dtype = nl.bfloat16 if config.mixed_precision else q.dtype
    dq = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    dk = nl.ndarray(k.shape, dtype=k.dtype, buffer=nl.shared_hbm)
    dv = nl.ndarray(v.shape, dtype=v.dtype, buffer=nl.shared_hbm)
    if dropout_p > 0.0:  # as AWS's kernel reads its seed and rate
        seed_local = nl.ndarray((nl.par_dim(1), 1), buffer=nl.sbuf, dtype=nl.int32)
        seed_local[0, 0] = nl.load(seed[0])
        dropout_p_tensor = nl.full((Q_TILE, 1), dropout_p, dtype=nl.float32)
    else:
        seed_local = dropout_p_tensor = None
    i_d, i_q = nl.mgrid[0:d, 0:Q_TILE]
    i_dk, i_k = nl.mgrid[0:d, 0:K]
    i_row, i_one = nl.mgrid[0:Q_TILE, 0:1]

    # Step 1, per query head of the group and query tile: D = rowsum(dO * O) and -lse, rows on partitions.
    dy_o_sum = nl.ndarray((group, n_q, nl.par_dim(Q_TILE), 1), dtype=nl.float32)
    neg_lse = nl.ndarray((group, n_q, nl.par_dim(Q_TILE), 1), dtype=nl.float32)
    dq_acc = nl.zeros((group, n_q, nl.par_dim(d), Q_TILE), dtype=nl.float32)
    for g in nl.affine_range(group):
        h = kv_h * group + g
        for i in nl.affine_range(n_q):
            dy_rows = nl.load_transpose2d(dy[b, h, i_d, i * Q_TILE + i_q], dtype=nl.float32)  # [128, d]
            o_rows = nl.load_transpose2d(o[b, h, i_d, i * Q_TILE + i_q], dtype=nl.float32)
            dy_o_sum[g, i] = nisa.tensor_reduce(np.add, nl.multiply(dy_rows, o_rows), axis=(1,), keepdims=True)
            neg_lse[g, i] = nl.negative(nl.load(lse[b, h, i_row, i + i_one], dtype=nl.float32))

    if sinks is not None:  # dsink = -sum_i exp(sink - lse_i) * D_i, a partition sum as a matmul with ones
        dsinks = nl.ndarray((q.shape[0], n_heads), dtype=nl.float32, buffer=nl.shared_hbm)
        ones = nl.full((Q_TILE, 1), 1.0, dtype=nl.float32)
        for g in nl.affine_range(group):
            h = kv_h * group + g
            sink = nl.broadcast_to(nl.load(sinks[h], dtype=nl.float32), shape=(Q_TILE, 1))
            dsink_psum = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.psum)
            for i in nl.affine_range(n_q):
                p_sink = nisa.activation(np.exp, neg_lse[g, i], bias=sink, dtype=nl.float32)
                dsink_psum += nisa.nc_matmul(nl.multiply(p_sink, dy_o_sum[g, i]), ones)
            nl.store(dsinks[nl.ds(b, 1), nl.ds(h, 1)], value=nl.negative(dsink_psum))

    for j in nl.affine_range(n_k):  # key tiles
        k_tile = nl.load(k[b, kv_h, i_dk, j * K + i_k], dtype=kernel_dtype)
        v_tile = nl.load(v[b, kv_h, i_dk, j * K + i_k], dtype=kernel_dtype)
        k_rows = nl.ndarray((K // K_TILE_BWD, nl.par_dim(K_TILE_BWD), d), dtype=kernel_dtype)
        for t in nl.affine_range(K // K_TILE_BWD):
            k_rows[t] = nl.load_transpose2d(k[b, kv_h, i_d, j * K + t * K_TILE_BWD + i_q], dtype=kernel_dtype)
        dk_psum = nl.zeros((nl.par_dim(d), K), dtype=nl.float32, buffer=nl.psum)
        dv_psum = nl.zeros((nl.par_dim(d), K), dtype=nl.float32, buffer=nl.psum)
        for g in nl.affine_range(group):
            h = kv_h * group + g
            # sequential: dK and dV add the query tiles in order, so their fp32 sums do not depend on a schedule
            for i in nl.sequential_range(n_q):
                q_tile = nl.load(q[b, h, i_d, i * Q_TILE + i_q], dtype=kernel_dtype)
                q_rows = nl.load_transpose2d(q[b, h, i_d, i * Q_TILE + i_q], dtype=kernel_dtype)
                dy_tile = nl.load(dy[b, h, i_d, i * Q_TILE + i_q], dtype=kernel_dtype)
                dy_rows = nl.load_transpose2d(dy[b, h, i_d, i * Q_TILE + i_q], dtype=kernel_dtype)
                _flash_attn_bwd_core(q_tile, q_rows, k_tile, k_rows, v_tile, dy_tile, dy_rows, neg_lse[g, i],
                                     dy_o_sum[g, i], dk_psum, dv_psum, dq_acc[g, i], i, j, scale, config,
                                     kernel_dtype, sliding_window=sliding_window, dropout_p=dropout_p,
                                     dropout_p_tensor=dropout_p_tensor, seed_local=seed_local,
                                     seed_offset=((b * n_heads + h) * n_q + i) * n_k + j)  # fmt: skip
        nl.store(dk[b, kv_h, i_dk, j * K + i_k], value=nl.multiply(dk_psum, scale, dtype=dk.dtype))
        nl.store(dv[b, kv_h, i_dk, j * K + i_k], value=nl.copy(dv_psum, dtype=dv.dtype))

    for g in nl.affine_range(group):
        for i in nl.affine_range(n_q):
            dq_tile = nl.multiply(dq_acc[g, i], scale, dtype=dq.dtype)
            nl.store(dq[b, kv_h * group + g, i_d, i * Q_TILE + i_q], value=dq_tile)
    if sinks is not None:
        return dq, dk, dv, dsinks
    return dq, dk, dv
