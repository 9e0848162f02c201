"""The linear kernel: ``out = x @ w (+ b) (then GELU, or + residual)`` for ``x`` [M, K] (rows are tokens),
``w`` [K, N] (the weight stored input-major, so its K rows land on the partitions as they lie in HBM).

The Tensor engine contracts over the partitions, so x is needed as x^T tiles [128 of K, 128 of M]. For 2-byte
dtypes they come in by DMA transpose (reference/nki.md §3.4: HBM -> SBUF at up to 90 % of DMA throughput), so the
Tensor engine does nothing but the matmuls; 4-byte dtypes (which the DMA transpose does not take) load whole rows
and transpose them on the Tensor engine. The weight is loaded once and stays in SBUF. Each 128-row tile
accumulates ``K / 128`` matmuls per 512-column block in one PSUM bank (x^T stationary, the weight block moving at
the array's full 512-column width), and the epilogue reads the accumulator once:

* ``none``: PSUM -> SBUF copy (the plain matmul an eager framework runs);
* ``bias``: the copy adds the bias row (Vector, PSUM + SBUF at one element per cycle: as cheap as the copy);
* ``gelu``: bias, then GELU (tanh approximation, Scalar engine);
* ``residual``: bias, then ``+ residual`` (GpSimd, so the Vector engine only evicts).

Ragged M (tokens), K and N are handled by masks and static tail tiles, never by padding in HBM.
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BLOCK_N = 512  # one PSUM bank of fp32 per partition: the widest moving tile (reference/nki.md §1.2 TC#2, TC#3)
EPILOGUES = ("none", "bias", "gelu", "residual")


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _x_transposed(x, m0, ok, k_tiles, dtype):
    """x^T for rows ``m0 .. m0 + 127``: one [k, 128] SBUF tile per K tile (ragged rows masked)."""
    i_p, i_m = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    xT = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), PMAX), dtype=dtype)
    if np.dtype(dtype).itemsize == 2:
        for j, (k0, ks) in enumerate(k_tiles):
            xT[j, nl.arange(ks)[:, None], i_m] = nl.load_transpose2d(x[m0 + i_p, k0 + nl.arange(ks)[None, :]],
                                                                     mask=ok)  # fmt: skip
        return xT
    rows = nl.load(x[m0 + i_p, nl.arange(x.shape[1])[None, :]], mask=ok)
    cols_ok = m0 + i_m < x.shape[0]
    for j, (k0, ks) in enumerate(k_tiles):
        t = nisa.nc_transpose(rows[i_p, k0 + nl.arange(ks)[None, :]], mask=cols_ok)
        xT[j, nl.arange(ks)[:, None], i_m] = nisa.tensor_copy(t, engine=nisa.scalar_engine, mask=cols_ok)
    return xT


@nki.jit
def linear_kernel(x, w, b=None, residual=None, epilogue="none"):
    m_rows, k_dim = x.shape
    n_dim = w.shape[1]
    out = nl.ndarray((m_rows, n_dim), dtype=x.dtype, buffer=nl.shared_hbm)
    k_tiles, n_blocks = _chunks(k_dim, PMAX), _chunks(n_dim, BLOCK_N)
    i_p = nl.arange(PMAX)[:, None]
    # The weight, loaded block by block in the order the first row tile uses it, so its first matmuls need not
    # wait for all of it.
    w_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), n_dim), dtype=w.dtype)
    for n0, ns in n_blocks:
        i_c = nl.arange(ns)[None, :]
        for j, (k0, ks) in enumerate(k_tiles):
            w_sb[j, nl.arange(ks)[:, None], n0 + i_c] = nl.load(w[k0 + nl.arange(ks)[:, None], n0 + i_c])
    if epilogue != "none":
        bias = nl.load(b.reshape((1, n_dim))).broadcast_to((PMAX, n_dim))
    for m in nl.affine_range(math.ceil(m_rows / PMAX)):
        m0 = m * PMAX
        ok = m0 + i_p < m_rows
        xT = _x_transposed(x, m0, ok, k_tiles, x.dtype)
        # Accumulators in a ring of two PSUM banks: block n+1 accumulates while block n is read out (a fresh tensor per
        # block would share one bank, making each block wait for the previous block's copy).
        acc_ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
        for blk, (n0, ns) in enumerate(n_blocks):
            i_c = nl.arange(ns)[None, :]
            acc = acc_ring[blk % 2, i_p, i_c]
            for j, (_, ks) in enumerate(k_tiles):
                product = nisa.nc_matmul(xT[j, nl.arange(ks)[:, None], nl.arange(PMAX)[None, :]],
                                         w_sb[j, nl.arange(ks)[:, None], n0 + i_c], mask=ok)  # fmt: skip
                if j == 0:
                    acc_ring[blk % 2, i_p, i_c] = product
                else:
                    acc_ring[blk % 2, i_p, i_c] += product
            if epilogue == "none":
                y = nisa.tensor_copy(acc, dtype=x.dtype, mask=ok)
            else:
                y = nisa.tensor_tensor(acc, bias[i_p, n0 + i_c], np.add, dtype=x.dtype, mask=ok)
            if epilogue == "gelu":
                y = nisa.activation(nl.gelu_apprx_tanh, y, dtype=x.dtype, mask=ok)
            elif epilogue == "residual":
                r = nl.load(residual[m0 + i_p, n0 + i_c], mask=ok)
                y = nisa.tensor_tensor(y, r, np.add, dtype=x.dtype, mask=ok, engine=nisa.gpsimd_engine)
            nl.store(out[m0 + i_p, n0 + i_c], value=y, mask=ok)
    return out
