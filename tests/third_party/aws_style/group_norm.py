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
