"""Group normalisation over the channels of each token, NKI 0.6 API, with bn_stats / bn_aggr.

x: [N, C] (tokens x channels), gamma/beta: [C]; C = G * group_size. For every token n and group g the mean and
population variance of x[n, g*gs:(g+1)*gs] normalise that slice, then y = xhat * gamma + beta. A group wider than
bn_stats_fmax is summarised in chunks (the last one ragged) and the chunk statistics aggregated by bn_aggr;
the last token tile is ragged too.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def group_norm(x, gamma, beta, num_groups, eps=1e-5):
    N, C = x.shape
    P = nl.tile_size.pmax
    FMAX = nl.tile_size.bn_stats_fmax
    gs = C // num_groups
    n_chunks = (gs + FMAX - 1) // FMAX
    y = nl.ndarray((N, C), dtype=x.dtype, buffer=nl.shared_hbm)

    # gamma and beta broadcast to every partition straight from HBM (partition step 0)
    gamma_sb = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_sb, src=gamma.ap(pattern=[[0, P], [1, C]], offset=0))
    beta_sb = nl.ndarray((P, C), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=beta_sb, src=beta.ap(pattern=[[0, P], [1, C]], offset=0))

    for t in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - t * P)
        x_sb = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[0:rows, :], src=x[nl.ds(t * P, rows), :])
        out_sb = nl.ndarray((P, C), dtype=x.dtype, buffer=nl.sbuf)
        for g in nl.affine_range(num_groups):
            stats = nl.ndarray((P, 6 * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
            for c in nl.affine_range(n_chunks):
                width = min(FMAX, gs - c * FMAX)
                nisa.bn_stats(dst=stats[0:rows, nl.ds(6 * c, 6)],
                              data=x_sb[0:rows, nl.ds(g * gs + c * FMAX, width)])
            mv = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.bn_aggr(dst=mv[0:rows, :], data=stats[0:rows, :])

            rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=rstd[0:rows, :], data=mv[0:rows, 1:2], op0=nl.add, operand0=eps)
            nisa.activation(dst=rstd[0:rows, :], op=nl.rsqrt, data=rstd[0:rows, :])

            xhat = nl.ndarray((P, gs), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=xhat[0:rows, :], data=x_sb[0:rows, nl.ds(g * gs, gs)], op0=nl.subtract,
                               operand0=mv[0:rows, 0:1], op1=nl.multiply, operand1=rstd[0:rows, :])
            nisa.tensor_tensor(dst=xhat[0:rows, :], data1=xhat[0:rows, :], data2=gamma_sb[0:rows, nl.ds(g * gs, gs)],
                               op=nl.multiply)
            nisa.tensor_tensor(dst=out_sb[0:rows, nl.ds(g * gs, gs)], data1=xhat[0:rows, :],
                               data2=beta_sb[0:rows, nl.ds(g * gs, gs)], op=nl.add)
        nisa.dma_copy(dst=y[nl.ds(t * P, rows), :], src=out_sb[0:rows, :])
    return y


# ---- the legacy (neuronxcc.nki) twin: masks for the ragged token tile, bn_stats per chunk into one stats tile ----
import neuronxcc.nki.isa as lnisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
from neuronxcc import nki as legacy_nki  # noqa: E402


@legacy_nki.jit
def group_norm_legacy(x, gamma, beta, num_groups, eps=1e-5):
    N, C = x.shape
    gs = C // num_groups
    FMAX = lnl.tile_size.bn_stats_fmax
    n_chunks = (gs + FMAX - 1) // FMAX
    y = lnl.ndarray((N, C), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_c = lnl.arange(C)[None, :]
    i_0 = lnl.arange(1)[None, :]
    g_sb = lnl.load(gamma.reshape((1, C))[i_0, i_c], dtype=lnl.float32)
    b_sb = lnl.load(beta.reshape((1, C))[i_0, i_c], dtype=lnl.float32)
    for t in lnl.affine_range((N + 127) // 128):
        i_p = t * 128 + lnl.arange(128)[:, None]
        x_sb = lnl.load(x[i_p, i_c], mask=(i_p < N))
        out = lnl.ndarray((128, C), dtype=x.dtype, buffer=lnl.sbuf)
        for g in lnl.static_range(num_groups):
            stats = lnl.ndarray((128, 6 * n_chunks), dtype=lnl.float32, buffer=lnl.sbuf)
            for c in lnl.static_range(n_chunks):
                width = min(FMAX, gs - c * FMAX)
                i_w = lnl.arange(width)[None, :]
                i_6 = lnl.arange(6)[None, :]
                stats[i_p - t * 128, 6 * c + i_6] = lnisa.bn_stats(x_sb[i_p - t * 128, g * gs + c * FMAX + i_w],
                                                                   mask=(i_p < N), dtype=lnl.float32)
            mv = lnisa.bn_aggr(stats, mask=(i_p < N))
            rstd = lnl.rsqrt(mv[:, 1:2] + eps, mask=(i_p < N))
            i_g = lnl.arange(gs)[None, :]
            xhat = lnl.multiply(x_sb[i_p - t * 128, g * gs + i_g] - mv[:, 0:1], rstd, mask=(i_p < N))
            out[i_p - t * 128, g * gs + i_g] = xhat * g_sb[0:1, g * gs:(g + 1) * gs] + b_sb[0:1, g * gs:(g + 1) * gs]
        lnl.store(y[i_p, i_c], value=out, mask=(i_p < N))
    return y
