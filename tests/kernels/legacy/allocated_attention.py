"""Self-attention for a small head size with every on-chip tensor placed by the kernel, in the style of AWS's
``allocated_fused_self_attn_for_SD_small_head_size``: ``softmax(q k^T / sqrt(d)) v`` for ``q, k, v`` of shape
``[seqlen, d_head]`` (``d_head <= 128``, ``seqlen`` a multiple of 128).

Placement (``ncc.sbuf.mod_alloc`` / ``ncc.psum.mod_alloc``, bytes counted up from 0 as the reference kernel does):
``K^T`` and ``V`` stay resident; every per-query-tile tensor is declared once with a block per tile and two slots
(``num_free_tiles=(2,)``: tile ``i`` reuses tile ``i - 2``'s space, a double buffer); the score chunks of one
query tile rotate over PSUM banks 0-1, the probability transposes over banks 2-3, the output accumulator over
banks 4-5.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.compiler as ncc
import nki_dsl.isa as nisa
import nki_dsl.language as nl


def _nbytes(dtype, n=1) -> int:
    return np.dtype(dtype).itemsize * n


@ncc.skip_middle_end_transformations
@nki.jit
def allocated_fused_self_attn_for_SD_small_head_size(q_ref, k_ref, v_ref, mixed_precision=True):
    seqlen, d_head = q_ref.shape
    kernel_dtype = q_ref.dtype
    pe_in_dt = nl.bfloat16 if mixed_precision else np.float32
    out_ref = nl.ndarray((seqlen, d_head), dtype=kernel_dtype, buffer=nl.shared_hbm)
    n_tiles = seqlen // 128
    kv_chunk = min(seqlen, 512)  # score columns per PSUM bank: 512 fp32 values
    n_chunks = seqlen // kv_chunk
    softmax_scale = 1.0 / math.sqrt(d_head)

    sca = 0
    k_t = nl.ndarray((nl.par_dim(d_head), seqlen), dtype=pe_in_dt, buffer=ncc.sbuf.mod_alloc(base_addr=sca))
    sca += _nbytes(pe_in_dt, seqlen)
    v_sb = nl.ndarray((n_tiles, nl.par_dim(128), d_head), dtype=pe_in_dt,
                      buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(n_tiles,)))
    sca += _nbytes(pe_in_dt, n_tiles * d_head)
    q_t = nl.ndarray((n_tiles, nl.par_dim(d_head), 128), dtype=pe_in_dt,
                     buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(2,)))
    sca += _nbytes(pe_in_dt, 2 * 128)
    scores = nl.ndarray((n_tiles, nl.par_dim(128), seqlen), dtype=np.float32,
                        buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(2,)))
    sca += _nbytes(np.float32, 2 * seqlen)
    probs_t = nl.ndarray((n_tiles, n_tiles, nl.par_dim(128), 128), dtype=pe_in_dt,
                         buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 2)))
    sca += _nbytes(pe_in_dt, 2 * 128)
    row_max = nl.ndarray((n_tiles, nl.par_dim(128), 1), dtype=np.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(2,)))
    sca += _nbytes(np.float32, 2)
    row_sum = nl.ndarray((n_tiles, nl.par_dim(128), 1), dtype=np.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(2,)))
    sca += _nbytes(np.float32, 2)
    out_sb = nl.ndarray((n_tiles, nl.par_dim(128), d_head), dtype=kernel_dtype,
                        buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(2,)))

    qk_psum = nl.ndarray((n_tiles, n_chunks, nl.par_dim(128), kv_chunk), dtype=np.float32,
                         buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(1, 2)))
    trans_psum = nl.ndarray((n_tiles, n_tiles, nl.par_dim(128), 128), dtype=np.float32,
                            buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(1, 2)))
    out_psum = nl.ndarray((n_tiles, nl.par_dim(128), d_head), dtype=np.float32,
                          buffer=ncc.psum.mod_alloc(base_bank=4, num_bank_tiles=(2,)))

    for j in nl.affine_range(n_tiles):  # K^T and V, loaded once
        k_t[:, nl.ds(j * 128, 128)] = nl.load_transpose2d(k_ref[nl.ds(j * 128, 128), :], dtype=pe_in_dt)
        v_sb[j] = nl.load(v_ref[nl.ds(j * 128, 128), :], dtype=pe_in_dt)

    for i in nl.affine_range(n_tiles):
        q_t[i] = nl.load_transpose2d(q_ref[nl.ds(i * 128, 128), :], dtype=pe_in_dt)
        for c in nl.affine_range(n_chunks):
            qk_psum[i, c] = nl.matmul(q_t[i], k_t[:, nl.ds(c * kv_chunk, kv_chunk)], transpose_x=True)
            scores[i, :, nl.ds(c * kv_chunk, kv_chunk)] = nl.multiply(qk_psum[i, c], softmax_scale)
        row_max[i] = nl.max(scores[i], axis=1, keepdims=True)
        scores[i] = nl.exp(nl.subtract(scores[i], row_max[i]))
        row_sum[i] = nl.sum(scores[i], axis=1, keepdims=True)
        out_psum[i][...] = 0.0
        for j in nl.affine_range(n_tiles):
            trans_psum[i, j] = nisa.nc_transpose(scores[i, :, nl.ds(j * 128, 128)])
            probs_t[i, j] = nl.copy(trans_psum[i, j], dtype=pe_in_dt)
            out_psum[i] += nl.matmul(probs_t[i, j], v_sb[j], transpose_x=True)
        out_sb[i] = nl.multiply(out_psum[i], nl.reciprocal(row_sum[i]), dtype=kernel_dtype)
        nl.store(out_ref[nl.ds(i * 128, 128), :], value=out_sb[i])
    return out_ref
