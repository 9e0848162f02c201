"""RMSNorm along rows, ``out = x / sqrt(mean(x^2) + epsilon) * g``, against AWS's current ``nki`` API.

The same algorithm as ``../kernel.py``: rows on partitions in tiles of ``pmax`` (128), the weight brought into
SBUF once for every partition (an HBM access pattern with partition step 0 reads the one row ``pmax`` times) and
reused by every row tile; the row-tile loop is unrolled at specialisation, so the ragged last tile is a slice.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm_kernel(x, g, epsilon=1e-6):
    num_rows, n = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    g_tile = nl.ndarray((pmax, n), dtype=g.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=g.ap([[0, pmax], [1, n]]))
    for start in range(0, num_rows, pmax):
        rows = min(pmax, num_rows - start)
        tile = nl.ndarray((pmax, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows, :], src=x[start : start + rows, :])
        squares = nl.ndarray((pmax, n), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares[0:rows, :], op=nl.square, data=tile[0:rows, :], reduce_op=nl.add,
                               reduce_res=sum_sq[0:rows, :], bias=None, scale=1.0)  # fmt: skip
        # mean(x^2) + epsilon, then its reciprocal square root: one scale per row
        rstd = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows, :], data=sum_sq[0:rows, :], op0=nl.multiply, operand0=1.0 / n,
                           op1=nl.add, operand1=epsilon)  # fmt: skip
        nisa.activation(dst=rstd[0:rows, :], op=nl.rsqrt, data=rstd[0:rows, :])
        normed = nl.ndarray((pmax, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed[0:rows, :], data=tile[0:rows, :], op0=nl.multiply, operand0=rstd[0:rows, :])
        y = nl.ndarray((pmax, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y[0:rows, :], data1=normed[0:rows, :], data2=g_tile[0:rows, :], op=nl.multiply)
        nisa.dma_copy(dst=out[start : start + rows, :], src=y[0:rows, :])
    return out


def rmsnorm(x, g, epsilon=1e-6):
    """RMSNorm of each row of ``x`` (rows, n) scaled by ``g`` (n,)."""
    if len(x.shape) != 2 or len(g.shape) != 1 or g.shape[0] != x.shape[1]:
        raise ValueError(f"rmsnorm takes x (rows, n) and g (n,), got {tuple(x.shape)} and {tuple(g.shape)}")
    return rmsnorm_kernel(x, g, float(epsilon))
