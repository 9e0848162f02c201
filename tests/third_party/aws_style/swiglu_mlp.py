"""SwiGLU MLP, NKI 0.6 API: y = (silu(x @ w_gate) * (x @ w_up)) @ w_down.

x: [T, H], w_gate/w_up: [H, F], w_down: [F, H]; T, H, F multiples of 128, H <= 512.
The up/gate projections are computed transposed (F on partitions) so their product feeds the down projection's
contraction directly. Contractions over more than 128 rows accumulate in PSUM across nc_matmul calls. With
`row_tiles=True` every 128-row contraction step is split into two 64-row PE tiles (tile_position / tile_size),
each reading its half of the partitions, accumulating into the same PSUM tile.
"""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl


@dataclass(frozen=True)
class MLPConfig(nl.NKIObject):
    row_tiles: bool = False
    token_tile: int = 128


def _project(dst_psum, weight_tiles, xT_tiles, m0, n0, n, cfg):
    """dst[m, n] = sum_k weight[k][:, m0:m0+128]^T @ xT[k][:, n0:n0+n] over every 128-row k tile."""
    steps = []
    for k in range(len(weight_tiles)):  # weight_tiles: a list; xT_tiles: a dict keyed "xT_<k>"
        if cfg.row_tiles:
            steps.append((k, 0))
            steps.append((k, 64))
        else:
            steps.append((k, None))
    for s, (k, half) in enumerate(steps):
        w = weight_tiles[k]
        xt = xT_tiles[f"xT_{k}"]
        if half is None:
            nisa.nc_matmul(dst=dst_psum, stationary=w[:, nl.ds(m0, 128)], moving=xt[:, nl.ds(n0, n)],
                           accumulate=(s > 0))
        else:
            nisa.nc_matmul(dst=dst_psum, stationary=w[nl.ds(half, 64), nl.ds(m0, 128)],
                           moving=xt[nl.ds(half, 64), nl.ds(n0, n)], tile_position=(half, 0), tile_size=(64, 128),
                           accumulate=(s > 0))


@nki.jit
def swiglu_mlp(x, w_gate, w_up, w_down, cfg=MLPConfig()):
    T, H = x.shape
    F = w_gate.shape[1]
    P = nl.tile_size.pmax
    TT = cfg.token_tile
    y = nl.ndarray((T, H), dtype=x.dtype, buffer=nl.shared_hbm)

    # weights stay resident: gate/up as H/128 tiles [128, F], down as F/128 tiles [128, H]
    wg, wu, wd = [], [], []
    for k in nl.affine_range(H // P):
        g = nl.ndarray((P, F), dtype=w_gate.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=g, src=w_gate[nl.ds(k * P, P), :])
        wg.append(g)
        u = nl.ndarray((P, F), dtype=w_up.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=w_up[nl.ds(k * P, P), :])
        wu.append(u)
    for f in nl.affine_range(F // P):
        d = nl.ndarray((P, H), dtype=w_down.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=w_down[nl.ds(f * P, P), :])
        wd.append(d)

    for t in nl.affine_range(T // TT):
        # x^T tiles [128 (H), TT] through TensorE transposes of [128 tokens, 128] blocks
        xT = {}
        for k in nl.affine_range(H // P):
            xt = nl.ndarray((P, TT), dtype=x.dtype, buffer=nl.sbuf)
            for s in nl.affine_range(TT // P):
                blk = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=blk, src=x[nl.ds(t * TT + s * P, P), nl.ds(k * P, P)])
                blk_T = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=blk_T, data=blk)
                nisa.tensor_copy(dst=xt[:, nl.ds(s * P, P)], src=blk_T)
            xT[f"xT_{k}"] = xt

        # h^T [F, TT] in 128-row tiles
        hT = []
        for f in nl.affine_range(F // P):
            gate_ps = nl.ndarray((P, TT), dtype=nl.float32, buffer=nl.psum)
            _project(gate_ps, wg, xT, f * P, 0, TT, cfg)
            up_ps = nl.ndarray((P, TT), dtype=nl.float32, buffer=nl.psum)
            _project(up_ps, wu, xT, f * P, 0, TT, cfg)
            act = nl.ndarray((P, TT), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=act, op=nl.silu, data=gate_ps)
            h = nl.ndarray((P, TT), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=h, data1=act, data2=up_ps, op=nl.multiply)
            hT.append(h)

        # y[tokens, :] = sum_f hT[f]^T @ w_down[f]
        for s in nl.affine_range(TT // P):
            y_ps = nl.ndarray((P, H), dtype=nl.float32, buffer=nl.psum)
            for f in nl.affine_range(F // P):
                nisa.nc_matmul(dst=y_ps, stationary=hT[f][:, nl.ds(s * P, P)], moving=wd[f])
            y_sb = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=y_sb, src=y_ps)
            nisa.dma_copy(dst=y[nl.ds(t * TT + s * P, P), :], src=y_sb)
    return y
