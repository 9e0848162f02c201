"""``lhsT.T @ rhs`` against AWS's current ``nki`` API (destination-passing ``nisa`` ops).

The algorithm of ``../kernel.py``'s tiled kernel: output tiles of 128 x 512 (one PSUM bank of fp32), the
contraction over K in tiles of 128 partitions accumulated in PSUM by the Tensor engine itself (``accumulate=False``
opens the accumulation group on the first K tile, ``True`` adds the others), then one copy to SBUF in the output
dtype and a store. Python loops are unrolled at specialisation, so the loop bounds are plain ``range``s.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    k, m = lhsT.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    tk, tm, tn = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    for m0 in range(0, m, tm):
        for n0 in range(0, n, tn):
            acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
            for k0 in range(0, k, tk):
                a = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k0 : k0 + tk, m0 : m0 + tm])
                b = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b, src=rhs[k0 : k0 + tk, n0 : n0 + tn])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=k0 > 0)
            y = nl.ndarray((tm, tn), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=y, src=acc)
            nisa.dma_copy(dst=out[m0 : m0 + tm, n0 : n0 + tn], src=y)
    return out


def matmul(lhsT, rhs):
    """``lhsT.T @ rhs``; K, M and N multiples of 128, 128 and 512 as the nki-dsl kernel requires."""
    if len(lhsT.shape) != 2 or len(rhs.shape) != 2 or lhsT.shape[0] != rhs.shape[0]:
        raise ValueError(f"matmul takes lhsT (K, M) and rhs (K, N), got {tuple(lhsT.shape)} and {tuple(rhs.shape)}")
    (k, m), n = lhsT.shape, rhs.shape[1]
    if k % 128 or m % 128 or n % 512:
        raise ValueError(f"matmul: K, M and N must be multiples of 128, 128 and 512, got {k}, {m}, {n}")
    return matmul_kernel(lhsT, rhs)
