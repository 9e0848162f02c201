"""Bidirectional attention ``softmax(scale * q k^T) v`` per (batch, head), against AWS's current ``nki`` API.

The resident-strip strategy of ``../kernel.py``, written plainly: for each tile of 128 queries, the fp32 score
strip over all keys (Tensor engine, 512 keys per PSUM bank, contraction over head_dim on the partitions of q^T and
k^T), its softmax along the free axis (the row max negated and scaled is the exponential's bias, the row sum is
read out of the same Scalar-engine instruction), then ``P v`` over key blocks of 128 (each probability block
transposed on the Tensor engine so keys sit on the partitions), normalised by the row sum at the end. Python loops
are unrolled at specialisation, so ragged tiles are slices.
"""

import nki
import nki.isa as nisa
import nki.language as nl

MAX_HEAD_DIM = 128  # head_dim is the contraction on the Tensor engine's partitions
MAX_SEQ = 16384  # the fp32 score strip of a query tile (64 KiB per partition) and k^T, v in SBUF


def _head(q, k, v, out, seq, d, scale):
    """One head: ``q``, ``k``, ``v``, ``out`` are (seq, d) views of HBM tensors."""
    pmax, fmax = nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    k_t = nl.ndarray((d, seq), dtype=k.dtype, buffer=nl.sbuf)  # keys on the free axis, head_dim on partitions
    nisa.dma_transpose(dst=k_t, src=k)
    v_blocks = []
    for kb in range(0, seq, pmax):
        kr = min(pmax, seq - kb)
        v_tile = nl.ndarray((pmax, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=v_tile[0:kr, :], src=v[kb : kb + kr, :])
        v_blocks.append((kb, kr, v_tile))
    for qs in range(0, seq, pmax):
        qr = min(pmax, seq - qs)
        q_t = nl.ndarray((d, pmax), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=q_t[:, 0:qr], src=q[qs : qs + qr, :])
        scores = nl.ndarray((pmax, seq), dtype=nl.float32, buffer=nl.sbuf)
        for ks in range(0, seq, fmax):
            kn = min(fmax, seq - ks)
            bank = nl.ndarray((pmax, fmax), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=bank[0:qr, 0:kn], stationary=q_t[:, 0:qr], moving=k_t[:, ks : ks + kn])
            nisa.tensor_copy(dst=scores[0:qr, ks : ks + kn], src=bank[0:qr, 0:kn])
        # exp(scale * s - scale * max): the bias is the negated row max times the scale
        bias = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=bias[0:qr, :], op=nl.maximum, data=scores[0:qr, :], axis=1, negate=True,
                           keepdims=True)  # fmt: skip
        nisa.tensor_scalar(dst=bias[0:qr, :], data=bias[0:qr, :], op0=nl.multiply, operand0=scale)
        probs = nl.ndarray((pmax, seq), dtype=q.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=probs[0:qr, :], op=nl.exp, data=scores[0:qr, :], reduce_op=nl.add,
                               reduce_res=row_sum[0:qr, :], bias=bias[0:qr, :], scale=scale)  # fmt: skip
        acc = nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for kb, kr, v_tile in v_blocks:
            p_t_psum = nl.ndarray((pmax, pmax), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=p_t_psum[0:kr, 0:qr], data=probs[0:qr, kb : kb + kr])
            p_t = nl.ndarray((pmax, pmax), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=p_t[0:kr, 0:qr], src=p_t_psum[0:kr, 0:qr])
            part = nl.ndarray((pmax, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=part[0:qr, :], stationary=p_t[0:kr, 0:qr], moving=v_tile[0:kr, :])
            nisa.tensor_tensor(dst=acc[0:qr, :], data1=acc[0:qr, :], data2=part[0:qr, :], op=nl.add)
        inv_sum = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum[0:qr, :], data=row_sum[0:qr, :])
        result = nl.ndarray((pmax, d), dtype=out.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result[0:qr, :], data=acc[0:qr, :], op0=nl.multiply, operand0=inv_sum[0:qr, :])
        nisa.dma_copy(dst=out[qs : qs + qr, :], src=result[0:qr, :])


@nki.jit
def attention_kernel(q, k, v, scale):
    batch, heads, seq, d = q.shape
    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    for b in range(batch):
        for h in range(heads):
            _head(q[b, h], k[b, h], v[b, h], out[b, h], seq, d, scale)
    return out


@nki.jit
def attention_qkv_kernel(qkv, num_heads, scale):
    batch, seq, width = qkv.shape
    d = width // (3 * num_heads)
    out = nl.ndarray((batch, seq, num_heads * d), dtype=qkv.dtype, buffer=nl.shared_hbm)
    for b in range(batch):
        for h in range(num_heads):
            q = qkv[b, :, h * d : (h + 1) * d]  # the packed layout (3, heads, head_dim) along the last axis
            k = qkv[b, :, (num_heads + h) * d : (num_heads + h + 1) * d]
            v = qkv[b, :, (2 * num_heads + h) * d : (2 * num_heads + h + 1) * d]
            _head(q, k, v, out[b, :, h * d : (h + 1) * d], seq, d, scale)
    return out


def _check(seq, d):
    if not 1 <= d <= MAX_HEAD_DIM or not 1 <= seq <= MAX_SEQ:
        raise ValueError(f"vit-attn: head_dim must be 1..{MAX_HEAD_DIM} and seq 1..{MAX_SEQ}, got {d} and {seq}")


def attention(q, k, v, scale=None):
    """Attention over (batch, heads, seq, head_dim); scale defaults to 1/sqrt(head_dim)."""
    if len(q.shape) != 4 or tuple(q.shape) != tuple(k.shape) or tuple(q.shape) != tuple(v.shape):
        raise ValueError(f"vit-attn: q, k, v must share one (batch, heads, seq, head_dim) shape, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")  # fmt: skip
    _check(q.shape[2], q.shape[3])
    return attention_kernel(q, k, v, float(q.shape[3] ** -0.5 if scale is None else scale))


def attention_qkv(qkv, num_heads, scale=None):
    """Attention from the fused QKV projection (batch, seq, 3 * heads * head_dim) -> (batch, seq, heads * head_dim)."""
    num_heads = int(num_heads)
    if len(qkv.shape) != 3 or num_heads < 1 or qkv.shape[2] % (3 * num_heads):
        raise ValueError(f"vit-attn: qkv must be (batch, seq, 3 * num_heads * head_dim), got {tuple(qkv.shape)} "
                         f"with num_heads {num_heads}")  # fmt: skip
    d = qkv.shape[2] // (3 * num_heads)
    _check(qkv.shape[1], d)
    return attention_qkv_kernel(qkv, num_heads, float(d**-0.5 if scale is None else scale))
