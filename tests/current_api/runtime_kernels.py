"""Kernels with runtime loops (``nl.dynamic_range`` / ``nl.fori_loop`` / ``nl.while_loop`` over registers), in the
current API, shared by ``test_runtime_loops.py`` and ``test_kv_decode.py``."""

import numpy as np

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl

TOKENS = 128  # KV-cache tokens per tile: one partition each in the P @ V matmul


@nki.jit
def decode_attention(q_t, k_cache_t, v_cache, seq_lens):
    """Token-generation attention over a KV cache whose filled length is known only at run time, in the style of
    a production decode kernel (flash decoding), per sequence b of the batch:
    ``out[b, h] = softmax(q[b, h] . K[b, :seq_len[b]] / sqrt(D)) @ V[b, :seq_len[b]]``.

    ``q_t`` [B, D, H]: the step's H query rows (heads sharing this KV head), transposed; ``k_cache_t`` [B, D, S_max]:
    the key cache, transposed as decode kernels keep it; ``v_cache`` [B, S_max, D]; ``seq_lens`` [B, 1] int32 in
    HBM: each sequence's filled tokens, a multiple of 128. Each sequence's loop over KV tiles runs
    ``seq_lens[b] // 128`` times, a register, with the running max, sum and output carried in SBUF (the online
    softmax); its bound, S_max // 128, comes from the cache's size (the largest trip count whose tiles stay inside
    it, current/dynamic.py)."""
    B, D, H = q_t.shape
    out = nl.ndarray((B, H, D), nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(B):
        _decode_one(q_t[b], k_cache_t[b], v_cache[b], seq_lens[b:b + 1, :], out[b])
    return out


def _decode_one(q_t, k_cache_t, v_cache, seq_len, out):
    D, H = q_t.shape
    scale = 1.0 / float(np.sqrt(D))
    q = nl.ndarray((D, H), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q, src=q_t)
    m = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)  # running max of the scaled scores
    nisa.memset(dst=m, value=-3.0e38)
    total = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)  # running sum of exp(score - m)
    nisa.memset(dst=total, value=0.0)
    acc = nl.ndarray((H, D), nl.float32, buffer=nl.sbuf)  # running sum of exp(score - m) * v
    nisa.memset(dst=acc, value=0.0)

    # the trip count: seq_len // 128, computed on chip and moved into a register
    n = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n, src=seq_len)
    nisa.tensor_scalar(dst=n, data=n, op0=nl.right_shift, operand0=7)
    tiles = nisa.register_alloc()
    nisa.register_load(tiles, n)

    for j in nl.dynamic_range(tiles):
        k = nl.ndarray((D, TOKENS), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=k, src=k_cache_t[:, nl.ds(j * TOKENS, TOKENS)])
        v = nl.ndarray((TOKENS, D), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=v, src=v_cache[nl.ds(j * TOKENS, TOKENS), :])
        s_psum = nl.ndarray((H, TOKENS), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=s_psum, stationary=q, moving=k)
        s = nl.ndarray((H, TOKENS), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=s, data=s_psum, op0=nl.multiply, operand0=scale)
        tile_max = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=tile_max, op=nl.maximum, data=s, axis=1, keepdims=True)
        m_new = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=m_new, data1=m, data2=tile_max, op=nl.maximum)
        neg = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg, data=m_new, op0=nl.multiply, operand0=-1.0)
        p = nl.ndarray((H, TOKENS), nl.float32, buffer=nl.sbuf)
        row = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=p, op=nl.exp, data=s, bias=neg, reduce_op=nl.add, reduce_res=row,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        corr = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)  # exp(m_old - m_new)
        nisa.activation(dst=corr, op=nl.exp, data=m, bias=neg)
        nisa.tensor_tensor(dst=total, data1=total, data2=corr, op=nl.multiply)
        nisa.tensor_tensor(dst=total, data1=total, data2=row, op=nl.add)
        p_t_psum = nl.ndarray((TOKENS, H), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=p_t_psum, data=p)
        p_t = nl.ndarray((TOKENS, H), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=p_t, src=p_t_psum)
        pv = nl.ndarray((H, D), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=pv, stationary=p_t, moving=v)
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=corr)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=pv, op=nl.add)
        nisa.tensor_copy(dst=m, src=m_new)

    inv = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=total)
    nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=inv)
    nisa.dma_copy(dst=out, src=acc)


def decode_attention_formula(q_t, k_cache_t, v_cache, seq_lens) -> np.ndarray:
    """The float64 formula ``decode_attention`` computes."""
    outs = []
    for b, n in enumerate(np.asarray(seq_lens).reshape(-1)):
        q = q_t[b].astype(np.float64).T
        k = k_cache_t[b].astype(np.float64)[:, :n]
        v = v_cache[b].astype(np.float64)[:n]
        s = q @ k / np.sqrt(q.shape[1])
        p = np.exp(s - s.max(axis=1, keepdims=True))
        outs.append((p / p.sum(axis=1, keepdims=True)) @ v)
    return np.stack(outs)
