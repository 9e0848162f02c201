"""RMSNorm fused with the QKV projection, every on-chip tensor placed by the kernel, in the style of AWS's
``allocated_fused_rms_norm_qkv``: ``out[b] = rmsnorm(hidden[b]) @ weights`` with ``rmsnorm(x) = x /
sqrt(mean(x^2) + eps)`` along the hidden dimension, computed in ``norm_dtype`` (a compile-time dtype argument).

``hidden`` is ``[batch, seqlen, dim]`` (``seqlen`` and ``dim`` multiples of 128), ``weights`` ``[dim, fused]``
(``fused`` at most 1024, a multiple of the 512-column PSUM chunk when larger than it). The weights stay resident
in SBUF; each 128-row tile of hidden states is normalised, transposed 128 columns at a time on the Tensor engine
(PSUM banks 0-1) and multiplied into an accumulator per 512-column chunk (banks 2-5, two tiles in flight).
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.compiler as ncc
import nki_dsl.isa as nisa
import nki_dsl.language as nl


def _nbytes(dtype, n=1) -> int:
    return np.dtype(dtype).itemsize * n


@ncc.skip_middle_end_transformations
@nki.jit
def allocated_fused_rms_norm_qkv(hidden, weights, norm_dtype=nl.float32, eps=1e-6):
    batch, seqlen, dim = hidden.shape
    _, fused = weights.shape
    out = nl.ndarray((batch, seqlen, fused), dtype=hidden.dtype, buffer=nl.shared_hbm)
    n_s, n_k = seqlen // 128, dim // 128
    chunk = min(fused, 512)
    n_o = fused // chunk

    sca = 0
    w_sb = nl.ndarray((n_k, nl.par_dim(128), fused), dtype=weights.dtype,
                      buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(n_k,)))
    sca += _nbytes(weights.dtype, n_k * fused)
    x_sb = nl.ndarray((batch, n_s, nl.par_dim(128), dim), dtype=hidden.dtype,
                      buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 2)))
    sca += _nbytes(hidden.dtype, 2 * dim)
    sq_sum = nl.ndarray((batch, n_s, nl.par_dim(128), 1), dtype=np.float32,
                        buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 2)))
    sca += _nbytes(np.float32, 2)
    x_norm = nl.ndarray((batch, n_s, nl.par_dim(128), dim), dtype=norm_dtype,
                        buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 2)))
    sca += _nbytes(norm_dtype, 2 * dim)
    # every 128-column transpose of a tile is read by each output chunk: a slot per column block
    x_t = nl.ndarray((batch, n_s, n_k, nl.par_dim(128), 128), dtype=norm_dtype,
                     buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 1, n_k)))
    sca += _nbytes(norm_dtype, n_k * 128)
    res = nl.ndarray((batch, n_s, n_o, nl.par_dim(128), chunk), dtype=hidden.dtype,
                     buffer=ncc.sbuf.mod_alloc(base_addr=sca, num_free_tiles=(1, 1, 2)))

    trans_psum = nl.ndarray((batch, n_s, n_k, nl.par_dim(128), 128), dtype=np.float32,
                            buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(1, 1, 2)))
    acc_psum = nl.ndarray((batch, n_s, n_o, nl.par_dim(128), chunk), dtype=np.float32,
                          buffer=ncc.psum.mod_alloc(base_bank=2, num_bank_tiles=(1, 2, n_o)))

    for k in nl.affine_range(n_k):
        w_sb[k] = nl.load(weights[nl.ds(k * 128, 128), :])
    for b in nl.affine_range(batch):
        for s in nl.affine_range(n_s):
            x_sb[b, s] = nl.load(hidden[b, nl.ds(s * 128, 128), :])
            sq_sum[b, s] = nl.sum(nl.square(x_sb[b, s]), axis=1, keepdims=True)
            rms_inv = nl.rsqrt(nl.add(nl.multiply(sq_sum[b, s], 1.0 / dim), eps))
            x_norm[b, s] = nl.multiply(x_sb[b, s], rms_inv, dtype=norm_dtype)
            for k in nl.affine_range(n_k):
                trans_psum[b, s, k] = nisa.nc_transpose(x_norm[b, s, :, nl.ds(k * 128, 128)])
                x_t[b, s, k] = nl.copy(trans_psum[b, s, k], dtype=norm_dtype)
            for o in nl.affine_range(n_o):
                acc_psum[b, s, o][...] = 0.0
                for k in nl.affine_range(n_k):
                    acc_psum[b, s, o] += nl.matmul(x_t[b, s, k], w_sb[k, :, nl.ds(o * chunk, chunk)],
                                                   transpose_x=True)
                res[b, s, o] = nl.copy(acc_psum[b, s, o], dtype=hidden.dtype)
                nl.store(out[b, nl.ds(s * 128, 128), nl.ds(o * chunk, chunk)], value=res[b, s, o])
    return out
