"""Depthwise 1-D convolution, NKI 0.6 API, with the taps as shifted access patterns over one SBUF tile.

x: [B, C, L], w: [C, K], bias: [C, 1] -> out [B, C, Lout], Lout = (L - dilation * (K - 1) - 1) // stride + 1:
out[b, c, t] = bias[c] + sum_k w[c, k] * x[b, c, t * stride + k * dilation]   (valid padding, cross-correlation)
Channels go on partitions (tiles of 128), the sequence on the free axis.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def depthwise_conv1d(x, w, bias, stride=1, dilation=1):
    B, C, L = x.shape
    K = w.shape[1]
    P = nl.tile_size.pmax
    Lout = (L - dilation * (K - 1) - 1) // stride + 1
    out = nl.ndarray((B, C, Lout), dtype=x.dtype, buffer=nl.shared_hbm)

    for c in nl.affine_range((C + P - 1) // P):
        ch = min(P, C - c * P)
        w_sb = nl.ndarray((P, K), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=w_sb[0:ch, :], src=w[nl.ds(c * P, ch), :])
        b_sb = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_sb[0:ch, :], src=bias[nl.ds(c * P, ch), :])
        for b in nl.affine_range(B):
            x_sb = nl.ndarray((P, L), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_sb[0:ch, :], src=x[b, nl.ds(c * P, ch), :])

            acc = nl.ndarray((P, Lout), dtype=nl.float32, buffer=nl.sbuf)
            # tap 0 starts the sum: acc = x[t*stride] * w0 + bias
            tap0 = x_sb.ap(pattern=[[L, ch], [stride, Lout]], offset=0)
            nisa.tensor_scalar(dst=acc[0:ch, :], data=tap0, op0=nl.multiply, operand0=w_sb[0:ch, 0:1],
                               op1=nl.add, operand1=b_sb[0:ch, :])
            for k in nl.static_range(1, K):
                tap = x_sb.ap(pattern=[[L, ch], [stride, Lout]], offset=k * dilation)
                nisa.scalar_tensor_tensor(dst=acc[0:ch, :], data=tap, op0=nl.multiply,
                                          operand0=w_sb[0:ch, k:k + 1], op1=nl.add, operand1=acc[0:ch, :])
            y = nl.ndarray((P, Lout), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=y[0:ch, :], src=acc[0:ch, :])
            nisa.dma_copy(dst=out[b, nl.ds(c * P, ch), :], src=y[0:ch, :])
    return out


# ---- the legacy (neuronxcc.nki) twin: taps as affine index expressions of nl.arange over the SBUF tile ----
import neuronxcc.nki.language as lnl  # noqa: E402
from neuronxcc import nki as legacy_nki  # noqa: E402


@legacy_nki.jit
def depthwise_conv1d_legacy(x, w, bias, stride=1, dilation=1):
    B, C, L = x.shape
    K = w.shape[1]
    Lout = (L - dilation * (K - 1) - 1) // stride + 1
    out = lnl.ndarray((B, C, Lout), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_l = lnl.arange(L)[None, :]
    i_t = lnl.arange(Lout)[None, :]
    i_k = lnl.arange(K)[None, :]
    i_1 = lnl.arange(1)[None, :]
    for c in lnl.affine_range((C + 127) // 128):
        i_p = c * 128 + lnl.arange(128)[:, None]
        live = i_p < C
        w_sb = lnl.load(w[i_p, i_k], mask=live, dtype=lnl.float32)
        b_sb = lnl.load(bias[i_p, i_1], mask=live, dtype=lnl.float32)
        for b in lnl.affine_range(B):
            x_sb = lnl.load(x[b, i_p, i_l], mask=live)
            acc = lnl.multiply(x_sb[i_p - c * 128, i_t * stride], w_sb[i_p - c * 128, 0], mask=live)
            acc = lnl.add(acc, b_sb, mask=live)
            for k in lnl.static_range(1, K):
                tap = x_sb[i_p - c * 128, i_t * stride + k * dilation]
                acc = lnl.add(acc, lnl.multiply(tap, w_sb[i_p - c * 128, k], mask=live), mask=live)
            lnl.store(out[b, i_p, i_t], value=acc, mask=live)
    return out
