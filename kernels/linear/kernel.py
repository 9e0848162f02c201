"""The linear kernel: ``out = x @ w (+ b) (then GELU, or + residual)`` for ``x`` [M, K] (rows are tokens),
``w`` [K, N] (the weight stored input-major, so its K rows land on the partitions as they lie in HBM).

The Tensor engine contracts over the partitions, so x is needed as x^T tiles [128 of K, 128 of M]: by DMA
transpose for 2-byte dtypes, else whole rows loaded and transposed on the Tensor engine (``transpose_by_dma``).
The weight is loaded once and stays in SBUF (block by block while the first ``PROLOGUE_TILES`` row tiles
compute). Each 128-row tile accumulates ``K / 128`` matmuls per 512-column block in one PSUM bank (x^T
stationary, the weight block moving at the array's full 512-column width), and the epilogue reads the
accumulator once:

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
PROLOGUE_TILES = 3  # row tiles computed while the weight streams in


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _x_transposed(x, m0, ok, k_tiles, dtype, by_dma):
    """x^T for rows ``m0 .. m0 + 127``: one [k, 128] SBUF tile per K tile (ragged rows masked). ``by_dma``: DMA
    transposes from HBM (2-byte dtypes); otherwise whole rows in (one efficient DMA) and Tensor-engine transposes
    copied out of PSUM by the Scalar engine, through a ring of two PSUM banks."""
    i_p, i_m = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    xT = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), PMAX), dtype=dtype)
    if by_dma:
        for j, (k0, ks) in enumerate(k_tiles):
            xT[j, nl.arange(ks)[:, None], i_m] = nl.load_transpose2d(x[m0 + i_p, k0 + nl.arange(ks)[None, :]],
                                                                     mask=ok)  # fmt: skip
        return xT
    rows = nl.load(x[m0 + i_p, nl.arange(x.shape[1])[None, :]], mask=ok)
    cols_ok = m0 + i_m < x.shape[0]
    t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=dtype, buffer=nl.psum)
    for j, (k0, ks) in enumerate(k_tiles):
        i_k = nl.arange(ks)[:, None]
        t_ps[j % 2, i_k, i_m] = nisa.nc_transpose(rows[i_p, k0 + nl.arange(ks)[None, :]], mask=cols_ok)
        xT[j, i_k, i_m] = nisa.activation(nl.copy, t_ps[j % 2, i_k, i_m], mask=cols_ok)  # Scalar-engine copy
    return xT


def transpose_by_dma(dtype) -> bool:
    """How x^T is made: by DMA transpose for 2-byte dtypes (the only ones it takes, reference/nki.md §2.6
    dma_transpose); it runs beside the Tensor engine, which then does nothing but matmuls. (Measured in the ViT
    encoder on trn2: loading rows and transposing on the Tensor engine instead was slower for every linear,
    even the narrow ones that are DMA-bound with DMA transposes: the in-order Tensor engine then waits for each
    tile's rows.) 4-byte dtypes transpose on the Tensor engine."""
    return np.dtype(dtype).itemsize == 2


def _block(x, w_sb, bias, residual, out, xT, ok, m0, acc, ys, n0, ns, k_tiles, epilogue):
    """One [128, ns] output block: ``K / 128`` matmuls accumulating in PSUM (``acc = (ring, slot)``), then the
    epilogue through SBUF slots ``ys = (ring_a, ring_b, slot)`` and the store. (Slots chosen by the caller: in
    straight-line code, tensors the allocator placed on the same bytes would make each block wait for the
    previous block's store.)"""
    ring, slot = acc
    ya, yb, y_slot = ys
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(ns)[None, :]
    for j, (_, ks) in enumerate(k_tiles):
        product = nisa.nc_matmul(xT[j, nl.arange(ks)[:, None], nl.arange(PMAX)[None, :]],
                                 w_sb[j, nl.arange(ks)[:, None], n0 + i_c], mask=ok)  # fmt: skip
        if j == 0:
            ring[slot, i_p, i_c] = product
        else:
            ring[slot, i_p, i_c] += product
    acc_t = ring[slot, i_p, i_c]
    if epilogue == "none":
        ya[y_slot, i_p, i_c] = nisa.tensor_copy(acc_t, dtype=x.dtype, mask=ok)
    else:
        ya[y_slot, i_p, i_c] = nisa.tensor_tensor(acc_t, bias[i_p, n0 + i_c], np.add, dtype=x.dtype, mask=ok)
    y = ya[y_slot, i_p, i_c]
    if epilogue == "gelu":
        yb[y_slot, i_p, i_c] = nisa.activation(nl.gelu_apprx_tanh, y, dtype=x.dtype, mask=ok)
        y = yb[y_slot, i_p, i_c]
    elif epilogue == "residual":
        r = nl.load(residual[m0 + i_p, n0 + i_c], mask=ok)
        yb[y_slot, i_p, i_c] = nisa.tensor_tensor(y, r, np.add, dtype=x.dtype, mask=ok, engine=nisa.gpsimd_engine)
        y = yb[y_slot, i_p, i_c]
    nl.store(out[m0 + i_p, n0 + i_c], value=y, mask=ok)


def _y_rings(slots, dtype):
    return tuple(nl.ndarray((slots, nl.par_dim(PMAX), BLOCK_N), dtype=dtype) for _ in range(2))


def _ok(x, m0):
    return m0 + nl.arange(PMAX)[:, None] < x.shape[0]


@nki.jit
def linear_kernel(x, w, b=None, residual=None, epilogue="none"):
    m_rows, k_dim = x.shape
    n_dim = w.shape[1]
    out = nl.ndarray((m_rows, n_dim), dtype=x.dtype, buffer=nl.shared_hbm)
    k_tiles, n_blocks = _chunks(k_dim, PMAX), _chunks(n_dim, BLOCK_N)
    n_tiles = math.ceil(m_rows / PMAX)
    w_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), n_dim), dtype=w.dtype)  # the whole weight, kept in SBUF
    bias = nl.load(b.reshape((1, n_dim))).broadcast_to((PMAX, n_dim)) if epilogue != "none" else None
    # Accumulators rotate over two PSUM banks, so block n+1 accumulates while block n is read out (a fresh tensor
    # per block would share one bank with the last and wait for its copy).
    # Prologue: the first PROLOGUE_TILES row tiles, block by block, each weight block loaded just before its
    # matmuls: the Tensor engine starts when the first block has arrived, and has PROLOGUE_TILES tiles of work
    # per block while the next one streams in (instead of idling until the whole weight is in SBUF).
    first = min(PROLOGUE_TILES, n_tiles)
    ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
    ya, yb = _y_rings(first * len(n_blocks), x.dtype)
    heads = [(u * PMAX, _ok(x, u * PMAX)) for u in range(first)]
    by_dma = transpose_by_dma(x.dtype)
    xTs = [_x_transposed(x, m0, ok, k_tiles, x.dtype, by_dma) for m0, ok in heads]
    turn = 0
    for n0, ns in n_blocks:
        i_c = nl.arange(ns)[None, :]
        for j, (k0, ks) in enumerate(k_tiles):
            w_sb[j, nl.arange(ks)[:, None], n0 + i_c] = nl.load(w[k0 + nl.arange(ks)[:, None], n0 + i_c])
        for (m0, ok), xT in zip(heads, xTs):
            _block(x, w_sb, bias, residual, out, xT, ok, m0, (ring, turn % 2), (ya, yb, turn), n0, ns, k_tiles,
                   epilogue)  # fmt: skip
            turn += 1
    for m in nl.affine_range(n_tiles - first):
        m0 = (m + first) * PMAX
        ok = _ok(x, m0)
        xT = _x_transposed(x, m0, ok, k_tiles, x.dtype, by_dma)
        tile_ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
        ta, tb = _y_rings(len(n_blocks), x.dtype)
        for blk, (n0, ns) in enumerate(n_blocks):
            _block(x, w_sb, bias, residual, out, xT, ok, m0, (tile_ring, blk % 2), (ta, tb, blk), n0, ns, k_tiles,
                   epilogue)  # fmt: skip
    return out
