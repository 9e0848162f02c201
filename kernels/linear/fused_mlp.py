"""The fused MLP of a transformer block: ``out = residual + gelu(x @ w1 + b1) @ w2 + b2``, the hidden activations
never leaving SBUF.

fc1 runs transposed: ``h^T = w1^T x^T`` with a [128, 128] block of w1 stationary and x^T [K1, 512 tokens] moving,
so the hidden units land on the PSUM partitions and fc1's bias is a per-partition value: bias and GELU (tanh
approximation) are one Scalar-engine ``activation`` straight out of PSUM. The resulting h^T tiles [128 hidden, 512
tokens] are exactly fc2's stationary operands (hidden units, fc2's contraction, on the partitions), so fc2 needs no
transpose either: per 128 tokens, ``sum over hidden tiles of h^T.T @ w2`` into a PSUM bank, then the bias
(Vector, PSUM + SBUF) and the residual (GpSimd) on the way out. Compared with two ``linear`` launches this saves
the hidden activations' round trip through HBM and fc2's DMA transposes of them.

Tokens go in blocks of 512 (the moving tile's width), the ragged last block with its static size; both weights
stay in SBUF. x^T comes in by DMA transpose (2-byte dtypes only, as in ``linear``).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128
BLOCK = 512  # tokens per block: fc1's moving width (one PSUM bank of fp32, reference/nki.md §1.2 TC#2/TC#3)


def _chunks(n, size):
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _x_transposed(x, t0, size, k1_tiles):
    i_t = nl.arange(size)[None, :]
    xT = nl.ndarray((len(k1_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    for j, (k0, ks) in enumerate(k1_tiles):
        xT[j, nl.arange(ks)[:, None], i_t] = nl.load_transpose2d(x[t0 + nl.arange(size)[:, None],
                                                                   k0 + nl.arange(ks)[None, :]])  # fmt: skip
    return xT


def _fc1(x, xT, w1_sb, b1T, size, k1_tiles, h_tiles):
    """h^T [hidden tiles, 128, tokens] of one token block."""
    i_t = nl.arange(size)[None, :]
    # fc1, transposed: h^T [hidden tile, tokens], bias + GELU fused into the copy out of PSUM (Scalar engine).
    hT = nl.ndarray((len(h_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    ring1 = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
    for jh, (h0, hs) in enumerate(h_tiles):
        i_h = nl.arange(hs)[:, None]
        for j, (_, ks) in enumerate(k1_tiles):
            prod = nisa.nc_matmul(w1_sb[j, nl.arange(ks)[:, None], h0 + nl.arange(hs)[None, :]],
                                  xT[j, nl.arange(ks)[:, None], i_t])  # fmt: skip
            if j == 0:
                ring1[jh % 2, i_h, i_t] = prod
            else:
                ring1[jh % 2, i_h, i_t] += prod
        hT[jh, i_h, i_t] = nisa.activation(nl.gelu_apprx_tanh, ring1[jh % 2, i_h, i_t], bias=b1T[i_h, jh],
                                           dtype=x.dtype)  # fmt: skip
    return hT


def _fc2(x, hT, w2_sb, b2, residual, out, t0, size, h_tiles, n_blocks):
    # fc2 per 128 tokens: h^T slices stationary, w2 blocks moving; bias and residual on the way out.
    ring2 = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
    ya = nl.ndarray((len(n_blocks) * math.ceil(size / PMAX), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    yb = nl.ndarray((len(n_blocks) * math.ceil(size / PMAX), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    turn = 0
    for s0, ss in _chunks(size, PMAX):
        i_s, i_sf = nl.arange(ss)[:, None], nl.arange(ss)[None, :]
        for n0, ns in n_blocks:
            i_c = nl.arange(ns)[None, :]
            for jh, (_, hs) in enumerate(h_tiles):
                prod = nisa.nc_matmul(hT[jh, nl.arange(hs)[:, None], s0 + i_sf], w2_sb[jh, nl.arange(hs)[:, None],
                                      n0 + i_c])  # fmt: skip
                if jh == 0:
                    ring2[turn % 2, i_s, i_c] = prod
                else:
                    ring2[turn % 2, i_s, i_c] += prod
            rows = t0 + s0 + i_s
            ya[turn, i_s, i_c] = nisa.tensor_tensor(ring2[turn % 2, i_s, i_c], b2[i_s, n0 + i_c], np.add,
                                                    dtype=x.dtype)  # fmt: skip
            yb[turn, i_s, i_c] = nisa.tensor_tensor(ya[turn, i_s, i_c], nl.load(residual[rows, n0 + i_c]), np.add,
                                                    dtype=x.dtype, engine=nisa.gpsimd_engine)  # fmt: skip
            nl.store(out[rows, n0 + i_c], value=yb[turn, i_s, i_c])
            turn += 1


def _token_block(x, w1_sb, b1T, w2_sb, b2, residual, out, t0, size, k1_tiles, h_tiles, n_blocks):
    """Tokens ``t0 .. t0 + size - 1`` (``t0`` may be a loop index, ``size`` is static)."""
    hT = _fc1(x, _x_transposed(x, t0, size, k1_tiles), w1_sb, b1T, size, k1_tiles, h_tiles)
    _fc2(x, hT, w2_sb, b2, residual, out, t0, size, h_tiles, n_blocks)


def _load_rows(dst, src, tiles, cols):
    for j, (r0, rs) in enumerate(tiles):
        dst[j, nl.arange(rs)[:, None], nl.arange(cols)[None, :]] = nl.load(
            src[r0 + nl.arange(rs)[:, None], nl.arange(cols)[None, :]])


@nki.jit
def mlp_kernel(x, w1, b1, w2, b2, residual):
    m_rows, k1 = x.shape
    hidden, n_dim = w2.shape
    out = nl.ndarray((m_rows, n_dim), dtype=x.dtype, buffer=nl.shared_hbm)
    k1_tiles, h_tiles, n_blocks = _chunks(k1, PMAX), _chunks(hidden, PMAX), _chunks(n_dim, BLOCK)
    blocks = _chunks(m_rows, BLOCK)
    # The first token block goes first, in DMA issue order too: its x^T, then w1 (fc1 needs it), then w2 (only
    # fc2 does), so the Tensor engine starts when w1's first tiles arrive instead of after both weights.
    xT0 = _x_transposed(x, 0, blocks[0][1], k1_tiles)
    w1_sb = nl.ndarray((len(k1_tiles), nl.par_dim(PMAX), hidden), dtype=w1.dtype)
    _load_rows(w1_sb, w1, k1_tiles, hidden)
    # fc1's bias as columns: b1T[p, jh] = b1[jh * 128 + p]; fc2's spread over the partitions.
    b1T = nl.ndarray((nl.par_dim(PMAX), len(h_tiles)), dtype=b1.dtype)
    for jh, (h0, hs) in enumerate(h_tiles):
        b1T[nl.arange(hs)[:, None], jh] = nl.load(b1.reshape((hidden, 1))[h0 + nl.arange(hs)[:, None], 0])
    hT0 = _fc1(x, xT0, w1_sb, b1T, blocks[0][1], k1_tiles, h_tiles)
    w2_sb = nl.ndarray((len(h_tiles), nl.par_dim(PMAX), n_dim), dtype=w2.dtype)
    _load_rows(w2_sb, w2, h_tiles, n_dim)
    b2_sb = nl.load(b2.reshape((1, n_dim))).broadcast_to((PMAX, n_dim))
    _fc2(x, hT0, w2_sb, b2_sb, residual, out, 0, blocks[0][1], h_tiles, n_blocks)
    n_full = m_rows // BLOCK
    for blk in nl.affine_range(max(0, n_full - 1)):
        _token_block(x, w1_sb, b1T, w2_sb, b2_sb, residual, out, (blk + 1) * BLOCK, BLOCK, k1_tiles, h_tiles,
                     n_blocks)  # fmt: skip
    if n_full >= 1 and m_rows % BLOCK:
        _token_block(x, w1_sb, b1T, w2_sb, b2_sb, residual, out, n_full * BLOCK, m_rows % BLOCK, k1_tiles, h_tiles,
                     n_blocks)  # fmt: skip
    return out
