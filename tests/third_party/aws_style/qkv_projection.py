"""Fused Q/K/V projection with the weights passed as one tuple argument, NKI 0.6 API.

x: [T, H]; weights = (w_q, w_k, w_v), each [H, N_i] (N_i <= 512, GQA: k/v narrower than q); T, H multiples of
128. Returns (q, k, v) = (x @ w_q, x @ w_k, x @ w_v) in x's dtype. x^T is built once per token tile (TensorE
transposes) and shared by the three projections; each weight is loaded once.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def qkv_projection(x, weights):
    T, H = x.shape
    P = nl.tile_size.pmax
    KT = H // P
    outs = tuple(nl.ndarray((T, w.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm) for w in weights)

    resident = []  # per weight, its H/128 row tiles
    for w in weights:
        tiles = []
        for k in nl.affine_range(KT):
            t = nl.ndarray((P, w.shape[1]), dtype=w.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=w[nl.ds(k * P, P), :])
            tiles.append(t)
        resident.append(tiles)

    for t in nl.affine_range(T // P):
        x_tile = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[nl.ds(t * P, P), :])
        xT = []
        for k in nl.affine_range(KT):
            ps = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=ps, data=x_tile[:, nl.ds(k * P, P)])
            sb = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=ps)
            xT.append(sb)
        for out, tiles in zip(outs, resident):
            N = out.shape[1]
            acc = nl.ndarray((P, N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=acc, stationary=xT[k], moving=tiles[k])
            res = nl.ndarray((P, N), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[nl.ds(t * P, P), :], src=res)
    return outs
