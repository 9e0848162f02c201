"""Causal grouped-query attention for prefill, NKI 0.6 API.

q: [B, Hq, S, D], k/v: [B, Hkv, S, D] with Hq a multiple of Hkv, S a multiple of 128 and at most 512 (one PSUM
bank of fp32 scores per query tile), D <= 128. K^T and V of a kv head are loaded once and shared by the query
heads of its group. The causal mask is applied with affine_select on the diagonal block only.
"""

import nki
import nki.isa as nisa
import nki.language as nl

NEG = -30000.0  # exp(NEG - max) underflows to 0 in fp32


@nki.jit
def gqa_causal_attention(q, k, v, softmax_scale=None):
    B, HQ, S, D = q.shape
    HKV = k.shape[1]
    group = HQ // HKV
    P = nl.tile_size.pmax
    n_tiles = S // P
    if softmax_scale is None:
        softmax_scale = 1.0 / (D ** 0.5)

    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)

    for b in nl.affine_range(B):
        for hk in nl.affine_range(HKV):
            # K^T [D, S] via TensorE transposes, V kept as a list of [128, D] tiles.
            kT = nl.ndarray((D, S), dtype=k.dtype, buffer=nl.sbuf)
            v_tiles = []
            for j in nl.affine_range(n_tiles):
                k_tile = nl.ndarray((P, D), dtype=k.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=k_tile, src=k[b, hk, nl.ds(j * P, P), :])
                kT_psum = nl.ndarray((D, P), dtype=k.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=kT_psum, data=k_tile)
                nisa.tensor_copy(dst=kT[:, nl.ds(j * P, P)], src=kT_psum)
                v_tile = nl.ndarray((P, D), dtype=v.dtype, buffer=nl.sbuf, name=f"v_tile_{j}")
                nisa.dma_copy(dst=v_tile, src=v[b, hk, nl.ds(j * P, P), :])
                v_tiles.append(v_tile)

            for g in nl.affine_range(group):
                h = hk * group + g
                for i in nl.affine_range(n_tiles):
                    width = (i + 1) * P  # keys 0 .. width-1 can be visible to this query tile

                    q_tile = nl.ndarray((P, D), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=q_tile, src=q[b, h, nl.ds(i * P, P), :])
                    qT_psum = nl.ndarray((D, P), dtype=q.dtype, buffer=nl.psum)
                    nisa.nc_transpose(dst=qT_psum, data=q_tile)
                    qT = nl.ndarray((D, P), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=qT, src=qT_psum)

                    s_psum = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=s_psum, stationary=qT, moving=kT[:, 0:width])

                    s_sb = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=s_sb, data=s_psum, op0=nl.multiply, operand0=softmax_scale)
                    # query row i*P + p sees key column c when i*P + p - c >= 0
                    diag = s_sb[:, nl.ds(i * P, P)]
                    nisa.affine_select(dst=diag, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=diag,
                                       on_false_value=NEG, cmp_op=nl.greater_equal, offset=0)

                    neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_reduce(dst=neg_max, op=nl.max, data=s_sb, axis=1, negate=True, keepdims=True)
                    probs = nl.ndarray((P, width), dtype=q.dtype, buffer=nl.sbuf)
                    row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.activation_reduce(dst=probs, op=nl.exp, data=s_sb, reduce_op=nl.add, reduce_res=row_sum,
                                           bias=neg_max)
                    inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.reciprocal(dst=inv_sum, data=row_sum)

                    o_psum = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)
                    for j in nl.affine_range(i + 1):
                        pT_psum = nl.ndarray((P, P), dtype=q.dtype, buffer=nl.psum)
                        nisa.nc_transpose(dst=pT_psum, data=probs[:, nl.ds(j * P, P)])
                        pT = nl.ndarray((P, P), dtype=q.dtype, buffer=nl.sbuf)
                        nisa.tensor_copy(dst=pT, src=pT_psum)
                        nisa.nc_matmul(dst=o_psum, stationary=pT, moving=v_tiles[j], accumulate=(j > 0))

                    o_sb = nl.ndarray((P, D), dtype=q.dtype, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=o_sb, data=o_psum, op0=nl.multiply, operand0=inv_sum)
                    nisa.dma_copy(dst=out[b, h, nl.ds(i * P, P), :], src=o_sb)
    return out
