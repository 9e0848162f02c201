"""Self-attention ``softmax(scale * Q K^T) V``, in the style of the legacy NKI tutorials.

* ``fused_self_attn_for_SD_small_head_size``: the Stable Diffusion tutorial kernel. ``q``, ``k``, ``v`` are
  ``[seqlen, d_head]``. Per 128-row query tile it computes the whole score strip into SBUF (not online), takes
  the row max as the min of negated per-tile maxima, exponentiates with ``nisa.activation`` (bias = -max),
  transposes probabilities with ``nisa.nc_transpose`` and contracts them with V; the division by the row sum is
  delayed to the ``[d_head, 128]`` result, which is stored transposed into ``out[seq, d]``.
* ``flash_fwd``: FlashAttention-2-style forward with an online softmax, launched on an SPMD grid
  ``[batch, heads]``. Layouts follow the NKI reference ``flash_fwd``: ``q``, ``k`` ``[b, h, d, seq]``, ``v``
  ``[b, h, seq, d]``, out ``[b, h, seq_q, d]``. K/V blocks run in a ``sequential_range``; running max ``m``, sum
  ``l`` and output ``o`` live in SBUF and are rescaled by ``exp(m_old - m_new)`` per block.
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def fused_self_attn_for_SD_small_head_size(q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True,
                                           softmax_scale=0.125):
    kernel_dtype = q_ref.dtype
    pe_in_dt = nl.bfloat16 if mixed_precision else np.float32
    assert q_ref.dtype == k_ref.dtype == v_ref.dtype
    out_ref = nl.ndarray(q_ref.shape, dtype=q_ref.dtype, buffer=nl.shared_hbm)

    seqlen, d_head = q_ref.shape
    assert d_head <= 128 and seqlen % 128 == 0
    q_seq_n_tiles, q_seq_tile_size = seqlen // 128, 128
    k_seq_n_tiles, k_seq_tile_size = seqlen // 128, 128
    d_head_tile_size = d_head

    # V tiles as they are in HBM: [128 (k seq), d_head]; the second matmul contracts over k seq.
    trans_v = nl.ndarray((nl.par_dim(k_seq_tile_size), k_seq_n_tiles, d_head), dtype=pe_in_dt)
    ip_v = nl.arange(k_seq_tile_size)[:, None]
    if_v = nl.arange(d_head_tile_size)[None, :]
    for i_k_seq_tile in nl.affine_range(k_seq_n_tiles):
        trans_v[ip_v, i_k_seq_tile, if_v] = nl.load(v_ref[i_k_seq_tile * k_seq_tile_size + ip_v, if_v],
                                                    dtype=pe_in_dt)

    # Q and K transposed on the way in ([d_head, 128]) so the first matmul contracts over d_head.
    ip_qk = nl.arange(d_head_tile_size)[:, None]
    if_qk = nl.arange(q_seq_tile_size)[None, :]
    ip_load = nl.arange(q_seq_tile_size)[:, None]
    if_load = nl.arange(d_head_tile_size)[None, :]
    q_local = nl.ndarray((q_seq_n_tiles, nl.par_dim(d_head_tile_size), q_seq_tile_size), dtype=pe_in_dt)
    for i_q_seq_tile in nl.affine_range(q_seq_n_tiles):
        q_local[i_q_seq_tile, ip_qk, if_qk] = nl.load_transpose2d(
            q_ref[i_q_seq_tile * q_seq_tile_size + ip_load, if_load], dtype=pe_in_dt) * softmax_scale
    k_local = nl.ndarray((k_seq_n_tiles, nl.par_dim(d_head_tile_size), k_seq_tile_size), dtype=pe_in_dt)
    for i_k_seq_tile in nl.affine_range(k_seq_n_tiles):
        k_local[i_k_seq_tile, ip_qk, if_qk] = nl.load_transpose2d(
            k_ref[i_k_seq_tile * k_seq_tile_size + ip_load, if_load], dtype=pe_in_dt)

    for i_q_seq_tile in nl.affine_range(q_seq_n_tiles):
        qk_res_buf = nl.ndarray((nl.par_dim(q_seq_tile_size), seqlen), dtype=kernel_dtype)
        neg_max_res = nl.ndarray((nl.par_dim(q_seq_tile_size), k_seq_n_tiles), dtype=kernel_dtype)
        ip_max = nl.arange(q_seq_tile_size)[:, None]
        if_max = nl.arange(k_seq_n_tiles)[None, :]
        ip_res = nl.arange(q_seq_tile_size)[:, None]
        if_res = nl.arange(k_seq_tile_size)[None, :]

        for i_k_seq_tile in nl.affine_range(k_seq_n_tiles):
            qk_psum = nl.zeros((nl.par_dim(q_seq_tile_size), k_seq_tile_size), dtype=np.float32, buffer=nl.psum)
            qk_psum[ip_res, if_res] += nisa.nc_matmul(moving=k_local[i_k_seq_tile, ip_qk, if_qk],
                                                      stationary=q_local[i_q_seq_tile, ip_qk, if_qk])
            if use_causal_mask:
                # -9984.0 stands for -inf, as neuronx-cc does: exp of it underflows to 0.
                qk_res_buf[ip_res, i_k_seq_tile * k_seq_tile_size + if_res] = nisa.affine_select(
                    pred=(i_q_seq_tile * q_seq_tile_size + ip_res >= i_k_seq_tile * k_seq_tile_size + if_res),
                    on_true_tile=qk_psum[ip_res, if_res], on_false_value=-9984.0, dtype=kernel_dtype)
            else:
                qk_res_buf[ip_res, i_k_seq_tile * k_seq_tile_size + if_res] = nl.copy(qk_psum[ip_res, if_res],
                                                                                      dtype=kernel_dtype)
            neg_max_res[ip_max, i_k_seq_tile] = nisa.tensor_reduce(
                np.max, data=qk_res_buf[ip_res, i_k_seq_tile * k_seq_tile_size + if_res], axis=(1,),
                dtype=kernel_dtype, negate=True)

        # min of the negated tile maxima = -(row max)
        neg_max_res_final = nisa.tensor_reduce(np.min, data=neg_max_res[ip_max, if_max], axis=(1,),
                                               dtype=kernel_dtype, negate=False)

        ip_softmax = nl.arange(q_seq_tile_size)[:, None]
        if_softmax = nl.arange(seqlen)[None, :]
        ip_sum_res = nl.arange(q_seq_tile_size)[:, None]
        if_sum_res = nl.arange(d_head_tile_size)[None, :]

        softmax_res = nl.ndarray((nl.par_dim(q_seq_tile_size), seqlen), dtype=pe_in_dt)
        sum_divisor = nl.ndarray((nl.par_dim(q_seq_tile_size), d_head_tile_size), dtype=kernel_dtype)

        exp_res = nisa.activation(np.exp, data=qk_res_buf[ip_softmax, if_softmax], bias=neg_max_res_final,
                                  scale=1.0)
        sum_res = nisa.tensor_reduce(np.add, data=exp_res, axis=(1,), dtype=kernel_dtype)
        softmax_res[ip_softmax, if_softmax] = nl.copy(exp_res, dtype=pe_in_dt)

        sum_reciprocal_broadcast = (1.0 / sum_res).broadcast_to((q_seq_tile_size, d_head_tile_size))
        sum_divisor[ip_sum_res, if_sum_res] = nl.copy(sum_reciprocal_broadcast, dtype=kernel_dtype)

        trans_softmax_res = nl.ndarray((nl.par_dim(k_seq_tile_size), k_seq_n_tiles, q_seq_tile_size),
                                       dtype=pe_in_dt)
        attn_res_psum = nl.zeros((nl.par_dim(d_head_tile_size), q_seq_tile_size), dtype=np.float32,
                                 buffer=nl.psum)
        ip_scores_t = nl.arange(k_seq_tile_size)[:, None]
        if_scores_t = nl.arange(q_seq_tile_size)[None, :]
        ip_scores = nl.arange(q_seq_tile_size)[:, None]
        if_scores = nl.arange(k_seq_tile_size)[None, :]
        for i_k_seq_tile in nl.affine_range(k_seq_n_tiles):
            trans_softmax_res[ip_scores_t, i_k_seq_tile, if_scores_t] = nisa.nc_transpose(
                softmax_res[ip_scores, i_k_seq_tile * k_seq_tile_size + if_scores])

        ip_out = nl.arange(d_head_tile_size)[:, None]
        if_out = nl.arange(q_seq_tile_size)[None, :]
        for i_k_seq_tile in nl.affine_range(k_seq_n_tiles):
            ip_v_t = nl.arange(k_seq_tile_size)[:, None]
            if_v_t = nl.arange(d_head_tile_size)[None, :]
            # [d_head, 128 q] += V_tile.T @ P_tile.T, contracting over the k-seq tile on partitions.
            attn_res_psum[ip_out, if_out] += nisa.nc_matmul(
                moving=trans_softmax_res[ip_scores_t, i_k_seq_tile, if_scores_t],
                stationary=trans_v[ip_v_t, i_k_seq_tile, if_v_t])

        attn_res_sbuf = nl.copy(attn_res_psum[ip_out, if_out], dtype=kernel_dtype)
        # The delayed softmax division, on the transposed result.
        attn_res_div = attn_res_sbuf * nisa.nc_transpose(sum_divisor[ip_sum_res, if_sum_res])
        nl.store(out_ref[i_q_seq_tile * q_seq_tile_size + if_out, ip_out], value=attn_res_div)
    return out_ref


@nki.jit
def flash_fwd(q, k, v, softmax_scale=None, use_causal_mask=True, mixed_precision=True, k_block=512):
    b_id = nl.program_id(0)
    h_id = nl.program_id(1)
    _, _, d, seqlen_q = q.shape
    seqlen_k = k.shape[-1]
    assert d <= 128 and seqlen_q % 128 == 0 and seqlen_k % k_block == 0 and k_block % 128 == 0
    o = nl.ndarray((q.shape[0], q.shape[1], seqlen_q, d), dtype=q.dtype, buffer=nl.shared_hbm)
    softmax_scale = softmax_scale or 1.0 / float(d) ** 0.5
    pe_dt = nl.bfloat16 if mixed_precision else np.float32
    n_q_tiles = seqlen_q // 128
    n_k_blocks = seqlen_k // k_block
    n_sub = k_block // 128

    ip_q = nl.arange(d)[:, None]
    if_q = nl.arange(128)[None, :]
    if_k = nl.arange(k_block)[None, :]
    ip_p, if_d = nl.mgrid[0:128, 0:d]
    ip_s, if_s = nl.mgrid[0:128, 0:128]
    i_one = nl.arange(1)[None, :]

    for i_q in nl.affine_range(n_q_tiles):
        q_tile = nl.load(q[b_id, h_id, ip_q, i_q * 128 + if_q], dtype=pe_dt) * softmax_scale  # [d, 128]
        # Running state for the 128 query rows of this tile (fp32, in SBUF, updated in place).
        m_buf = nl.full((nl.par_dim(128), 1), -np.inf, dtype=np.float32)
        l_buf = nl.zeros((nl.par_dim(128), 1), dtype=np.float32)
        o_buf = nl.zeros((nl.par_dim(128), d), dtype=np.float32)

        for j in nl.sequential_range(n_k_blocks):
            k_tile = nl.load(k[b_id, h_id, ip_q, j * k_block + if_k], dtype=pe_dt)  # [d, k_block]
            v_tile = nl.ndarray((n_sub, nl.par_dim(128), d), dtype=pe_dt)
            for t in nl.affine_range(n_sub):
                v_tile[t, ip_p, if_d] = nl.load(v[b_id, h_id, j * k_block + t * 128 + ip_p, if_d], dtype=pe_dt)

            qk_psum = nl.matmul(q_tile, k_tile, transpose_x=True)  # [128 q, k_block] in PSUM
            if use_causal_mask:
                qk = nisa.affine_select(pred=(i_q * 128 + ip_p >= j * k_block + if_k), on_true_tile=qk_psum,
                                        on_false_value=-9984.0, dtype=np.float32)
            else:
                qk = nl.copy(qk_psum, dtype=np.float32)

            block_max = nisa.tensor_reduce(np.max, data=qk, axis=(1,), keepdims=True)
            m_new = nl.maximum(m_buf, block_max)
            # alpha = exp(m_old - m_new) rescales what was accumulated under the old max.
            alpha = nisa.activation(np.exp, data=m_new, bias=m_buf, scale=-1.0)
            neg_m_new = nl.negative(m_new)
            row_sum = nl.ndarray((nl.par_dim(128), 1), dtype=np.float32)
            p = nisa.activation_reduce(np.exp, data=qk, bias=neg_m_new, reduce_op=np.add, reduce_res=row_sum,
                                       dtype=pe_dt)

            pv_psum = nl.zeros((nl.par_dim(128), d), dtype=np.float32, buffer=nl.psum)
            for t in nl.affine_range(n_sub):
                p_t = nl.copy(nisa.nc_transpose(p[ip_s, t * 128 + if_s]), dtype=pe_dt)  # [128 k, 128 q]
                pv_psum += nl.matmul(p_t, v_tile[t, ip_p, if_d], transpose_x=True)

            o_buf[ip_p, if_d] = nl.add(nl.multiply(o_buf, alpha), pv_psum)
            l_buf[ip_p, i_one] = nl.add(nl.multiply(l_buf, alpha), row_sum)
            m_buf[ip_p, i_one] = nl.copy(m_new)

        out = nl.multiply(o_buf, nl.reciprocal(l_buf), dtype=q.dtype)
        nl.store(o[b_id, h_id, i_q * 128 + ip_p, if_d], value=out)
    return o
