"""Flash-attention backward in the legacy API, in the style of AWS's reference ``flash_attn_bwd``
(reference/nki.md §4.2 (c)): GQA (the query heads of a group share one KV head), a causal mask, a frozen
``FlashConfig`` argument, the per-tile work in a ``@nki.jit(mode='trace')`` helper inlined into the kernel, and
``affine_range`` / ``sequential_range`` loops.

Layouts as AWS's: ``q``, ``o``, ``dy`` are ``[bs, n_heads, d, seq]``, ``k``, ``v`` are ``[bs, kv_heads, d, seq]``,
``lse`` is ``[bs, n_heads, 128, seq // 128]`` (query row ``t * 128 + p`` at ``[..., p, t]``). Launched
``flash_attn_bwd[bs, kv_heads]``; returns ``dq, dk, dv`` in the layouts of ``q, k, v``.

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
class FlashConfig:
    k_tile_size: int = 512  # keys per score tile: [128 queries, 512 keys] of fp32 is one PSUM bank (§1.1)
    causal: bool = True
    mixed_precision: bool = True  # Tensor-engine operands in bf16; every accumulation stays fp32


Q_TILE = 128  # query rows per tile: the partitions of a score tile
K_TILE_BWD = 128  # keys per transposed block (the Tensor engine transposes at most 128 x 128)


@nki.jit(mode="trace")
def _flash_attn_bwd_core(q_tile, q_rows, k_tile, k_rows, v_tile, dy_tile, dy_rows, neg_lse, dy_o_sum,
                         dk_psum, dv_psum, dq_acc, i_q, i_k, scale, config, kernel_dtype):  # fmt: skip
    """One (query tile, key tile) pair. ``q_tile``, ``dy_tile`` are [d, 128], ``k_tile``, ``v_tile`` [d, K];
    ``q_rows``, ``dy_rows`` [128, d], ``k_rows`` [K / 128, 128, d]; ``neg_lse`` and ``dy_o_sum`` are the query
    tile's [128, 1] columns. dK^T, dV^T [d, K] (PSUM) and dQ^T [d, 128] (SBUF) are accumulated."""
    K = config.k_tile_size
    # As AWS's kernel: under the causal mask a query tile that starts before the key tile sees none of its keys
    # (tiles are aligned), so every instruction of the pair is masked off (a mask over two loop variables).
    live = (i_q * Q_TILE >= i_k * K) if config.causal else None
    s_psum = nisa.nc_matmul(q_tile, k_tile, mask=live)  # [128 q, K] = Q^T K
    if config.causal:
        i_p, i_f = nl.mgrid[0:Q_TILE, 0:K]
        s = nisa.affine_select(i_q * Q_TILE + i_p >= i_k * K + i_f, s_psum, nl.finfo(nl.float32).min,
                               dtype=nl.float32, mask=live)  # fmt: skip
    else:
        s = nl.copy(s_psum, dtype=nl.float32)
    p = nisa.activation(np.exp, s, bias=neg_lse, scale=scale, dtype=nl.float32, mask=live)  # exp(scale * s - lse)
    dv_psum += nisa.nc_matmul(dy_rows, nl.static_cast(p, kernel_dtype), mask=live)  # [d, K] += dO^T P
    dp_psum = nisa.nc_matmul(dy_tile, v_tile, mask=live)  # [128 q, K] = dO V^T
    ds = nisa.scalar_tensor_tensor(data=dp_psum, op0=np.subtract, operand0=dy_o_sum, op1=np.multiply, operand1=p,
                                   dtype=kernel_dtype, mask=live)  # fmt: skip
    dk_psum += nisa.nc_matmul(q_rows, ds, mask=live)  # [d, K] += Q dS
    i_s, i_t = nl.mgrid[0:Q_TILE, 0:K_TILE_BWD]
    for b in nl.affine_range(K // K_TILE_BWD):
        ds_t = nl.copy(nisa.nc_transpose(ds[i_s, b * K_TILE_BWD + i_t], mask=live), dtype=kernel_dtype, mask=live)
        dq_acc[...] += nisa.nc_matmul(k_rows[b], ds_t, mask=live)  # [d, 128 q] += K dS^T


@nki.jit
def flash_attn_bwd(q, k, v, o, dy, lse, config=FlashConfig(), softmax_scale=None):
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
                                     kernel_dtype)  # fmt: skip
        nl.store(dk[b, kv_h, i_dk, j * K + i_k], value=nl.multiply(dk_psum, scale, dtype=dk.dtype))
        nl.store(dv[b, kv_h, i_dk, j * K + i_k], value=nl.copy(dv_psum, dtype=dv.dtype))

    for g in nl.affine_range(group):
        for i in nl.affine_range(n_q):
            dq_tile = nl.multiply(dq_acc[g, i], scale, dtype=dq.dtype)
            nl.store(dq[b, kv_h * group + g, i_d, i * Q_TILE + i_q], value=dq_tile)
    return dq, dk, dv
