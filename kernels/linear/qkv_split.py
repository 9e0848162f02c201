"""LayerNorm + the QKV projection of a ViT block, written in the split layout vit-attn's ``attention_split``
reads (``kernels/vit_attn/split_layout.py``): ``qkT`` (2 * hd, M), q^T and (scale * k)^T feature-major, and
``v`` (M, hd) token-major, for ``x`` (M, K) and the fused QKV weight ``w`` (K, 3 * hd) with bias ``b`` (3 * hd,).

The LayerNorm is the prologue (``norm_prologue``): LN(x)^T tiles [128 of K, up to 512 tokens] per token block.
Those are exactly the moving operand of the q/k matmuls in the transposed orientation, ``(x W)^T = W^T x^T``:
a [128 of K, 128 features] block of w stationary, LN(x)^T moving, the result [128 features, tokens] in PSUM, so
q^T and k^T come out of the matmuls with the features on the partitions, as attention needs them, and their
bias is per partition: the PSUM copy adds it (and multiplies k by the softmax scale) as one Scalar-engine
activation. V keeps the token-major orientation (LN(x)^T stationary, w's V columns moving) and its bias is a row
(broadcast once by a ones matmul). Compared with the token-major projection plus ``attention_qkv``, attention
no longer transposes q and k on the Tensor engine nor copies the transposes out of PSUM.

Token blocks of 512 are pipelined one block ahead (``fused_mlp._ln_blocks``' scheme): block t+1's rows and
LayerNorm row work come before block t's V part in program order, its transposes after. A concrete trace unrolls
every block; a shape family (``token_blocks``) does up to four, the last masked to the rows below M, and past that
loops over runs of four masked blocks, the pipeline carried from one iteration to the next (``_carried``).
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from . import token_blocks
from .fused_mlp import GROUP_BLOCKS, _ln_stage1, _ln_stage2, _ln_tiles
from .kernel import ChunkedWeight, _static
from .norm_prologue import LayerNormPrologue, norm_columns
from .token_blocks import BLOCK, Span

PMAX = 128
W_CHUNK = 1024  # weight columns per load, in the order the matmuls use them (several K tiles per transfer)
FAMILY_RUN = GROUP_BLOCKS  # token blocks per iteration of a shape family's loop (even: see _carried)
QK_STORE_TILES = 4  # q^T / k^T feature tiles per store (4 KiB per partition at 512 bf16 tokens, §3.4)


def _chunks(n, size):
    return [(s, min(size, n - s)) for s in range(0, n, size)]


class _Projection:
    def __init__(self, x, w, b, qkT, v, scale):
        self.x, self.qkT, self.v, self.scale = x, qkT, v, float(scale)
        self.bufs = {}  # _slot's result buffers
        k_dim, n_dim = w.shape
        self.hd = n_dim // 3
        self.k_tiles, self.f_tiles = _chunks(k_dim, PMAX), _chunks(2 * self.hd, PMAX)
        self.v_blocks = _chunks(self.hd, BLOCK)
        # the bias of q and k as per-partition columns (k's multiplied by the scale), V's as a row
        self.b_cols = norm_columns((b,), _chunks(n_dim, PMAX))
        row = nl.ndarray((nl.par_dim(1), self.hd), dtype=b.dtype)  # before the weight in DMA order, which is FIFO
        nisa.dma_copy(dst=row[0, nl.arange(self.hd)[None, :]], src=b.reshape((1, n_dim))[0, 2 * self.hd + nl.arange(
            self.hd)[None, :]])  # fmt: skip
        # the weight in column chunks, each an SBUF tensor of its own (``ChunkedWeight``: the first matmuls do not
        # wait for the last chunk); q/k's and V's chunks apart, so that no 128-feature tile or 512-column V block
        # straddles two
        self.w_sb = ChunkedWeight(w, self.k_tiles)
        chunks = _chunks(2 * self.hd, W_CHUNK) + [(2 * self.hd + c0, cs) for c0, cs in _chunks(self.hd, W_CHUNK)]
        for c0, cs in chunks:  # several K tiles per transfer (>= 4 KiB per partition)
            self.w_sb.load(c0, cs)
        kt_cols = nl.ndarray((nl.par_dim(PMAX), len(self.f_tiles)), dtype=nl.float32)
        half = len(self.f_tiles) // 2
        i_p = nl.arange(PMAX)[:, None]
        kt_cols[i_p, nl.arange(half)[None, :]] = nisa.tensor_copy(self.b_cols[i_p, nl.arange(half)[None, :]],
                                                                  dtype=nl.float32)  # fmt: skip
        kt_cols[i_p, half + nl.arange(half)[None, :]] = nisa.tensor_scalar(
            self.b_cols[i_p, half + nl.arange(half)[None, :]], np.multiply, self.scale, dtype=nl.float32)
        self.qk_bias = kt_cols
        self.row, self.v_bias = row, None
        self.ones = nl.full((nl.par_dim(1), PMAX), 1.0, dtype=b.dtype)  # made early: the Vector queue fills up

    def _slot(self, name, shape):
        """An SBUF result buffer of one token block, alternating between two made on first use (a tensor allocated
        per block may be placed on the bytes of the previous block's other results, and its writes then wait for
        their store)."""
        if name not in self.bufs:
            self.bufs[name] = ([nl.ndarray(shape, dtype=self.x.dtype) for _ in range(2)], [0])
        pair, used = self.bufs[name]
        used[0] += 1
        return pair[(used[0] - 1) % 2]

    def ring(self):
        """The PSUM accumulators of one token block, q/k and V alike rotating over two banks."""
        self.turn = 0
        return nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)

    def qk(self, ring, xT, span):
        """q^T and (scale * k)^T of one token block (``token_blocks.Span``): per 128 features, K / 128 matmuls
        into a PSUM bank, then one activation (bias, and the scale for k) into SBUF, and the store."""
        i_t = nl.arange(span.width)[None, :]
        ok = span.valid(i_t)  # the tokens are the free axis
        out = self._slot("qk", (len(self.f_tiles), nl.par_dim(PMAX), BLOCK))
        half = len(self.f_tiles) // 2
        for jf, (f0, fs) in enumerate(self.f_tiles):
            i_f = nl.arange(fs)[:, None]
            slot = self.turn % 2
            self.turn += 1
            for j, (_, ks) in enumerate(self.k_tiles):
                prod = nisa.nc_matmul(self.w_sb.tile(j, ks, f0, fs), xT[j, nl.arange(ks)[:, None], i_t], mask=ok)
                if j == 0:
                    ring[slot, i_f, i_t] = prod
                else:
                    ring[slot, i_f, i_t] += prod
            scale = self.scale if jf >= half else 1.0
            out[jf, i_f, i_t] = nisa.activation(nl.copy, ring[slot, i_f, i_t], scale=scale,
                                                bias=self.qk_bias[i_f, jf], dtype=self.x.dtype, mask=ok)  # fmt: skip
            if (jf + 1) % QK_STORE_TILES == 0 or jf + 1 == len(self.f_tiles):
                self._store_qk(out, jf + 1 - (jf % QK_STORE_TILES + 1), jf + 1, span)

    def _store_qk(self, out, a, b, span):
        """Feature tiles ``a .. b - 1`` of a token block in one transfer ([128, tiles, size]: each partition
        ``tiles * size * 2`` bytes, one fixed cost, reference/nki.md §3.4). Full 128-row feature tiles only
        (2 * hd is a multiple of 128 for every head count and head_dim the kernel takes; else one per tile)."""
        t0 = span.t0
        if any(self.f_tiles[j][1] != PMAX for j in range(a, b)):
            for j in range(a, b):
                f0, fs = self.f_tiles[j]
                i_f, i_t = nl.arange(fs)[:, None], nl.arange(span.width)[None, :]
                nl.store(self.qkT[f0 + i_f, t0 + i_t], value=out[j, i_f, i_t], mask=span.valid(i_t))
            return
        i_f3, i_j3 = nl.arange(PMAX)[:, None, None], nl.arange(b - a)[None, :, None]
        i_t3 = nl.arange(span.width)[None, None, :]
        nisa.dma_copy(dst=self.qkT[(a + i_j3) * PMAX + i_f3, t0 + i_t3], src=out[a + i_j3, i_f3, i_t3],
                      mask=span.valid(i_t3))  # fmt: skip

    def _broadcast_v_bias(self):
        """V's bias row spread over the partitions by a ones matmul (reference/nki.md §2.4), made when the first
        V block needs it: earlier, the in-order Tensor engine would wait for it before the first q/k matmuls."""
        i_p = nl.arange(PMAX)[:, None]
        ones = self.ones
        self.v_bias = nl.ndarray((nl.par_dim(PMAX), self.hd), dtype=self.row.dtype)
        for n0, ns in self.v_blocks:
            i_c = nl.arange(ns)[None, :]
            self.v_bias[i_p, n0 + i_c] = nisa.activation(nl.copy, nisa.nc_matmul(ones, self.row[0, n0 + i_c]),
                                                         dtype=self.row.dtype)  # fmt: skip

    def values(self, ring, xT, span):
        """V of one token block, token-major: per 128 tokens and 512 columns, K / 128 matmuls, the bias row added
        in the PSUM copy (Vector), the store."""
        if self.v_bias is None:
            self._broadcast_v_bias()
        t0, subs = span.t0, span.tiles
        outs = [(u, s0, ss, n0, ns) for u, (s0, ss) in enumerate(subs) for n0, ns in self.v_blocks]
        y = self._slot("v", (BLOCK // PMAX, nl.par_dim(PMAX), self.hd))  # whole rows per 128 tokens
        for u, s0, ss, n0, ns in outs:
            i_s, i_c = nl.arange(ss)[:, None], nl.arange(ns)[None, :]
            ok = span.valid(s0 + i_s)
            slot = self.turn % 2
            self.turn += 1
            for j, (_, ks) in enumerate(self.k_tiles):
                prod = nisa.nc_matmul(xT[j, nl.arange(ks)[:, None], s0 + nl.arange(ss)[None, :]],
                                      self.w_sb.tile(j, ks, 2 * self.hd + n0, ns), mask=ok)  # fmt: skip
                if j == 0:
                    ring[slot, i_s, i_c] = prod
                else:
                    ring[slot, i_s, i_c] += prod
            y[u, i_s, n0 + i_c] = nisa.tensor_tensor(ring[slot, i_s, i_c], self.v_bias[i_s, n0 + i_c], np.add,
                                                     dtype=self.x.dtype, mask=ok)  # fmt: skip
        # the block's V rows in one transfer per run of full 128-token tiles ([128, tiles, hd]), a ragged tile
        # alone, and every tile of a shape family's masked block alone, masked (a mask over the tile and the row
        # together, ``t0 + 128 u + s < M``, is beyond the NumPy backend's masked accesses)
        full = sum(1 for _, ss in subs if ss == PMAX) if span.exact else 0
        i_s3, i_u3, i_c3 = nl.arange(PMAX)[:, None, None], nl.arange(full)[None, :, None], nl.arange(self.hd)[
            None, None, :]  # fmt: skip
        if full:
            nisa.dma_copy(dst=self.v[t0 + i_u3 * PMAX + i_s3, i_c3], src=y[i_u3, i_s3, i_c3])
        for u, (s0, ss) in enumerate(subs[full:], start=full):
            i_s, i_c = nl.arange(ss)[:, None], nl.arange(self.hd)[None, :]
            nl.store(self.v[t0 + s0 + i_s, i_c], value=y[u, i_s, i_c], mask=span.valid(s0 + i_s))



def _run(norm, proj, x, bufs, blocks, k_tiles, tiles=None):
    """Token blocks ``blocks`` (``token_blocks.Span`` each) pipelined one block ahead (see the module docstring),
    their buffers their own (``bufs``: the LayerNorm ring, made here if None; ``tiles``: the first block's stage-1
    tiles if the caller made them)."""
    per = BLOCK // PMAX
    if bufs is None:
        bufs = norm.ring(2 * per, PMAX)
    proj.bufs = {}  # this run's result slots (inside a loop's body: the iteration's own)
    if tiles is None:
        tiles = _ln_stage1(norm, bufs, 0, blocks[0])
    # x^T of two blocks in flight, in tensors of their own: a tensor allocated per block may be placed on bytes
    # the previous block's V rows used, and its transposes then wait for that block's V store
    xTs = [nl.ndarray((len(k_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype) for _ in range(min(2, len(blocks)))]
    xT = _ln_stage2(norm, x, tiles, blocks[0], k_tiles, xTs[0])
    for t, span in enumerate(blocks):  # static: one block ahead
        nxt = (t + 1) % 2 * per
        if t + 1 < len(blocks):  # block t+1's rows before block t's stores in DMA order (booked in issue order)
            norm.load(bufs, _ln_tiles(nxt, blocks[t + 1]))
        ring = proj.ring()
        proj.qk(ring, xT, span)
        ahead = _ln_stage1(norm, bufs, nxt, blocks[t + 1], loaded=True) if t + 1 < len(blocks) else None
        proj.values(ring, xT, span)
        if ahead is not None:
            xT = _ln_stage2(norm, x, ahead, blocks[t + 1], k_tiles, xTs[(t + 1) % 2])


def _carried(norm, proj, x, m_rows, runs, k_tiles, bufs, first, tiles):
    """A shape family's token blocks past the static run: ``runs`` iterations of a sequential loop over
    FAMILY_RUN blocks each, masked to the rows below ``m_rows`` (``token_blocks.Span`` with a limit), pipelined one
    block ahead across the iterations too: each iteration's last block prepares the next iteration's first (its
    rows, LayerNorm and transposes into ring slot 0 and x^T buffer 0, which the loop carries; FAMILY_RUN is even, so
    the next iteration finds it where its first block looks), so the in-order engines never drain between runs as
    they would between runs of independent blocks (measured on trn2 with ViT-B/16's widths at 2100-3584 rows:
    runs of independent blocks were 1.06-1.10x the concrete trace's fully unrolled pipeline; this loop, with the
    first block's rows before the weight as there, models the same, 131.6 vs 131.6 us at 2100 rows). The last
    iteration's look-ahead block lies past the last row: masked off whole. ``bufs``: the LayerNorm ring, with the
    first block's stage-1 ``tiles`` in slot 0 (``first``: its Span)."""
    per = BLOCK // PMAX
    xTs = [nl.ndarray((len(k_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype) for _ in range(2)]
    _ln_stage2(norm, x, tiles, first, k_tiles, xTs[0])
    for g in nl.sequential_range(runs):
        blocks = [Span((g * FAMILY_RUN + i) * BLOCK, BLOCK, m_rows) for i in range(FAMILY_RUN + 1)]
        proj.bufs = {}  # the iteration's own result slots
        for t in range(FAMILY_RUN):
            nxt = (t + 1) % 2 * per
            norm.load(bufs, _ln_tiles(nxt, blocks[t + 1]))
            ring = proj.ring()
            proj.qk(ring, xTs[t % 2], blocks[t])
            ahead = _ln_stage1(norm, bufs, nxt, blocks[t + 1], loaded=True)
            proj.values(ring, xTs[t % 2], blocks[t])
            _ln_stage2(norm, x, ahead, blocks[t + 1], k_tiles, xTs[(t + 1) % 2])


@nki.jit
def layernorm_qkv_kernel(x, gamma, beta, w, b, scale=0.125, epsilon=1e-6, schedule="auto"):
    """``schedule``: "resident" (token blocks of 512, below), "tiled" (one 128-token tile at a time, the width
    families': ``fused_widths.qkv_widths``) or "auto" (a family over the widths "tiled", else "resident")."""
    m_rows, k_dim = x.shape
    hd = w.shape[1] // 3
    qkT = nl.ndarray((2 * hd, m_rows), dtype=x.dtype, buffer=nl.shared_hbm)
    v = nl.ndarray((m_rows, hd), dtype=x.dtype, buffer=nl.shared_hbm)
    if schedule not in ("auto", "resident", "tiled"):
        raise ValueError(f"layernorm_qkv: schedule must be 'auto', 'resident' or 'tiled', got {schedule!r}")
    if schedule == "tiled" or (schedule == "auto" and (_static(k_dim) is None or _static(w.shape[1]) is None)):
        from .fused_widths import qkv_widths
        from .widths import LayerNormed

        qkv_widths(x, w, b, qkT, v, scale, LayerNormed(x, gamma, beta, epsilon, z_on_vector=True))
        return qkT, v
    k_tiles = _chunks(k_dim, PMAX)
    norm = LayerNormPrologue(x, gamma, beta, epsilon, k_tiles)
    # a concrete trace: every block in one static run; a shape family the same where its ranges fix the block
    # count at FAMILY_RUN or fewer, else runs of FAMILY_RUN blocks masked to the rows below M (token_blocks.pipeline)
    full, limit, rest = token_blocks.pipeline(m_rows, FAMILY_RUN, group_concrete=False)
    if _static(full) == 0:
        bufs = norm.ring(2 * (BLOCK // PMAX), PMAX)
        tiles = _ln_stage1(norm, bufs, 0, rest[0])  # the first block's rows before the weight, in DMA order too
        proj = _Projection(x, w, b, qkT, v, scale)
        _run(norm, proj, x, bufs, rest, k_tiles, tiles)
        return qkT, v
    bufs = norm.ring(2 * (BLOCK // PMAX), PMAX)
    first = Span(0, BLOCK, m_rows)
    tiles = _ln_stage1(norm, bufs, 0, first)  # the first block's rows before the weight, in DMA order too
    proj = _Projection(x, w, b, qkT, v, scale)
    proj._broadcast_v_bias()  # before the loop: every iteration reads it
    _carried(norm, proj, x, m_rows, full, k_tiles, bufs, first, tiles)
    return qkT, v
