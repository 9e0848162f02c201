"""LayerNorm along rows, ``out = (x - mean) / sqrt(var + epsilon) * gamma + beta``, against AWS's current ``nki``.

The same algorithm as ``../kernel.py``: rows on partitions in tiles of ``pmax``; the statistics from the Vector
engine's ``bn_stats`` (at most ``bn_stats_fmax`` elements per instruction) and ``bn_aggr``; the normalisation
``x * rstd + (-mean * rstd)`` as one Scalar-engine ``activation`` with a per-row scale and bias; gamma and beta
brought into SBUF once for every partition (an HBM access pattern with partition step 0). The row-tile loop is
unrolled at specialisation, so the ragged last tile is a slice.
"""

import nki
import nki.isa as nisa
import nki.language as nl

MAX_COLUMNS = 16384


@nki.jit
def layernorm_kernel(x, gamma, beta, epsilon=1e-6):
    num_rows, n = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pmax, fmax = nl.tile_size.pmax, nl.tile_size.bn_stats_fmax
    chunks = [(s, min(fmax, n - s)) for s in range(0, n, fmax)]
    g = nl.ndarray((pmax, n), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap([[0, pmax], [1, n]]))
    b = nl.ndarray((pmax, n), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=b, src=beta.ap([[0, pmax], [1, n]]))
    for start in range(0, num_rows, pmax):
        rows = min(pmax, num_rows - start)
        tile = nl.ndarray((pmax, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows, :], src=x[start : start + rows, :])
        stats = nl.ndarray((pmax, 6 * len(chunks)), dtype=nl.float32, buffer=nl.sbuf)
        for c, (s, size) in enumerate(chunks):
            nisa.bn_stats(dst=stats[0:rows, 6 * c : 6 * c + 6], data=tile[0:rows, s : s + size])
        mean_var = nl.ndarray((pmax, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var[0:rows, :], data=stats[0:rows, :])
        # rstd = 1 / sqrt(var + epsilon); the bias of the normalisation is -mean * rstd
        rstd = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows, :], data=mean_var[0:rows, 1:2], op0=nl.add, operand0=epsilon)
        nisa.activation(dst=rstd[0:rows, :], op=nl.rsqrt, data=rstd[0:rows, :])
        neg_mean_rstd = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_mean_rstd[0:rows, :], data=mean_var[0:rows, 0:1], op0=nl.multiply,
                           operand0=rstd[0:rows, :], op1=nl.multiply, operand1=-1.0)  # fmt: skip
        z = nl.ndarray((pmax, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=z[0:rows, :], op=nl.copy, data=tile[0:rows, :], bias=neg_mean_rstd[0:rows, :],
                        scale=rstd[0:rows, :])  # fmt: skip
        scaled = nl.ndarray((pmax, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled[0:rows, :], data1=z[0:rows, :], data2=g[0:rows, :], op=nl.multiply)
        y = nl.ndarray((pmax, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y[0:rows, :], data1=scaled[0:rows, :], data2=b[0:rows, :], op=nl.add)
        nisa.dma_copy(dst=out[start : start + rows, :], src=y[0:rows, :])
    return out


def layernorm(x, gamma, beta, epsilon=1e-6):
    """LayerNorm of each row of ``x`` (rows, n) with per-column ``gamma`` and ``beta`` (n,)."""
    if len(x.shape) != 2 or tuple(gamma.shape) != (x.shape[1],) or tuple(beta.shape) != (x.shape[1],):
        raise ValueError(f"layernorm takes x (rows, n), gamma (n,), beta (n,); got {tuple(x.shape)}, "
                         f"{tuple(gamma.shape)}, {tuple(beta.shape)}")  # fmt: skip
    if x.shape[1] > MAX_COLUMNS:
        raise ValueError(f"layernorm: at most {MAX_COLUMNS} columns per row, got {x.shape[1]}")
    return layernorm_kernel(x, gamma, beta, float(epsilon))
