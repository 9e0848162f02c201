"""Per-row fp8 (e4m3fn) quantisation and dequantisation, NKI 0.6 API.

quantize_rows(x [N, D]) -> (q [N, D] uint8 holding e4m3fn bit patterns, scale [N, 1] fp32) with
x ~= q * scale and scale = max(|x_row|, 1e-12) / 448. The fp8 tile is written to HBM through a `.view(nl.uint8)`
of the on-chip tile; dequantisation views the loaded bytes back as fp8.
"""

import nki
import nki.isa as nisa
import nki.language as nl

FP8_MAX = 448.0  # largest finite float8_e4m3fn


@nki.jit
def quantize_rows(x):
    N, D = x.shape
    P = nl.tile_size.pmax
    q = nl.ndarray((N, D), dtype=nl.uint8, buffer=nl.shared_hbm)
    scales = nl.ndarray((N, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - i * P)  # ragged last tile
        xt = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:rows, :], src=x[nl.ds(i * P, rows), :])

        absx = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        amax = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=absx[0:rows, :], op=nl.abs, data=xt[0:rows, :])
        nisa.tensor_reduce(dst=amax[0:rows, :], op=nl.max, data=absx[0:rows, :], axis=1, keepdims=True)
        # two ops in one instruction: clamp away from zero, then divide by the fp8 range
        scale = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=scale[0:rows, :], data=amax[0:rows, :], op0=nl.maximum, operand0=1e-12,
                           op1=nl.multiply, operand1=1.0 / FP8_MAX)
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:rows, :], data=scale[0:rows, :])

        qt = nl.ndarray((P, D), dtype=nl.float8_e4m3fn, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=qt[0:rows, :], data=xt[0:rows, :], op0=nl.multiply, operand0=inv[0:rows, :])
        nisa.dma_copy(dst=q[nl.ds(i * P, rows), :], src=qt.view(nl.uint8)[0:rows, :])
        nisa.dma_copy(dst=scales[nl.ds(i * P, rows), :], src=scale[0:rows, :])
    return q, scales


@nki.jit
def dequantize_rows(q, scales, out_dtype):
    N, D = q.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((N, D), dtype=out_dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - i * P)
        raw = nl.ndarray((P, D), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.dma_copy(dst=raw[0:rows, :], src=q[nl.ds(i * P, rows), :])
        s = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s[0:rows, :], src=scales[nl.ds(i * P, rows), :])
        y = nl.ndarray((P, D), dtype=out_dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows, :], data=raw.view(nl.float8_e4m3fn)[0:rows, :], op0=nl.multiply,
                           operand0=s[0:rows, :])
        nisa.dma_copy(dst=out[nl.ds(i * P, rows), :], src=y[0:rows, :])
    return out
