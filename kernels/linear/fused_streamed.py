"""The fused MLPs (``mlp``, ``layernorm_mlp``) for weights that do not both fit SBUF: the hidden units in blocks of
``H_BLOCK``, each block's slices of the two weights loaded, used and dropped, the output accumulating in PSUM across
the blocks. The resident schedules (``fused_mlp``, ``fused_widths.mlp_widths``) keep both whole weights in SBUF and
are faster where they fit (they load each weight once per launch); ViT-H/14's MLP (K 1280, H 5120: the two weights
alone take 200 of a trn2 partition's 224 KiB, reference/nki.md §1.1) is where this one takes over.

Per token block of ``tb`` 128-token tiles (an affine loop of ``ceil(M / (128 tb))``, the tiles past M masked off):

* x^T (or LN(x)^T) of each tile from ``widths.Rows`` / ``widths.LayerNormed``, as the resident family makes it;
* the tile's output accumulators zeroed in PSUM, then per block of ``H_BLOCK`` hidden units (an affine loop): w1's
  [K, H_BLOCK] and w2's [H_BLOCK, N] slices in one transfer each (allocated in the loop, so the allocator gives them
  rotating copies: the next block's weights stream in while this block computes), then per tile h^T =
  gelu(w1^T x^T + b1) for the block's hidden tiles (``fused_widths._hidden_T``'s instructions) and fc2's matmuls
  accumulating into the tile's output accumulators, which stay in PSUM from the first hidden tile to the last;
* the epilogue (bias on the Vector engine, residual on GpSimd) out of PSUM, whole rows stored.

PSUM sums every element's products in hidden-tile order, as the resident kernels do, so the numbers are theirs bit
for bit (tests/kernels/test_fused_streamed.py). The weights are read once per token block, so the token block is as
wide as PSUM allows: ``tb * ceil(N / 512)`` accumulator banks of the 8 (reference/nki.md §1.1), two kept for fc1's
accumulator and x^T's transposes. N above 6 banks' 3072 columns is not served (it would need the output in SBUF).
"""

import math

import numpy as np

import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import BLOCK_N, PMAX
from .widths import SBUF_PARTITION_BYTES, bias_row, top

PSUM_BANKS = 8  # per partition, 2 KiB each: one [128, 512] fp32 accumulator (reference/nki.md §1.1)
OUT_BANKS = PSUM_BANKS - 2  # the output accumulators' share: one bank for fc1's, one for x^T's transposes
MAX_TILES = 4  # 128-token tiles per block at most: 512 tokens, the resident kernel's token block (token_blocks)
# Hidden units per weight block: 4 hidden tiles, so that w1's [K, 512] slice and w2's [512, N] slice move >= 4 KiB
# per partition in one transfer each from K, N = 1024 (bf16) up, the DMA curve's amortised size (reference/nki.md
# §3.4), while two copies of each stay small beside x^T (their size does not grow with H).
H_BLOCK = 512
MAX_N = OUT_BANKS * BLOCK_N


def _below(h0, h_dim, mask, like):
    """``mask`` restricted to ``h0 < h_dim`` (a hidden tile's first unit below H; ``h0`` an int or a loop index, H an
    int or a symbol): None when both are ints and the tile lies past H (the instruction is left out), ``mask`` when
    they are ints and it does not, else ``mask`` and the condition as a mask term (over ``like``'s axes with
    coefficient 0: a comparison of a symbol is not a Python bool, §1.3)."""
    if isinstance(h0, int) and isinstance(h_dim, int):
        return mask if h0 < h_dim else None
    return mask & (h0 + 0 * like < h_dim)


def token_tiles(n_top: int) -> int:
    """128-token tiles per block for outputs up to ``n_top`` wide: as many as the output accumulators' banks hold."""
    return max(1, min(MAX_TILES, OUT_BANKS // math.ceil(n_top / BLOCK_N)))


def _weight_blocks(w1, w2, hb, kt_max, n_width):
    """w1's columns and w2's rows ``hb * H_BLOCK ..`` (the hidden units below H): w1's as [K tiles, 128, H_BLOCK],
    w2's as [H_BLOCK / 128, 128, N width], one 3-D transfer each (one fixed cost, reference/nki.md §3.4). The rows
    of a ragged last K tile past K, and of a ragged hidden tile past H, are zeroed (a masked memset, empty but for
    the ragged tile, so dropped elsewhere, §1.3): the matmuls contract over all 128 partitions of a tile, and the
    other operand's rows there are zero, which must not meet stale NaNs."""
    k_dim, h_dim = w1.shape
    n_dim = w2.shape[1]
    h0 = hb * H_BLOCK
    ht = H_BLOCK // PMAX
    i_p, i_c = nl.arange(PMAX)[:, None, None], nl.arange(H_BLOCK)[None, None, :]
    i_j = nl.arange(kt_max)[None, :, None]
    w1b = nl.ndarray((kt_max, nl.par_dim(PMAX), H_BLOCK), dtype=w1.dtype)
    # (each tile's own bound too, ``i_j * 128 < K``: a masked instruction is priced at its mask's bounding box, which
    # the simulator takes from the constraints of one axis each)
    nisa.dma_copy(dst=w1b[i_j, i_p, i_c], src=w1[i_j * PMAX + i_p, h0 + i_c],
                  mask=(i_j * PMAX + i_p < k_dim) & (i_j * PMAX < k_dim) & (h0 + i_c < h_dim))  # fmt: skip
    ragged = (i_j * PMAX < k_dim) & (i_j * PMAX + PMAX > k_dim)  # the ragged tile alone (one axis each, as above)
    w1b[i_j, i_p, i_c] = nisa.memset((PMAX, kt_max, H_BLOCK), 0, w1.dtype, mask=(i_j * PMAX + i_p >= k_dim) & ragged)
    i_t, i_n = nl.arange(ht)[None, :, None], nl.arange(n_width)[None, None, :]
    w2b = nl.ndarray((ht, nl.par_dim(PMAX), n_width), dtype=w2.dtype)
    rows = h0 + i_t * PMAX + i_p
    nisa.dma_copy(dst=w2b[i_t, i_p, i_n], src=w2[rows, i_n],
                  mask=(rows < h_dim) & (h0 + i_t * PMAX < h_dim) & (i_n < n_dim))  # fmt: skip
    # (only the ragged hidden tile: fc2 leaves out the tiles past H, so their rows are never read)
    ragged = (h0 + i_t * PMAX < h_dim) & (h0 + i_t * PMAX + PMAX > h_dim)
    w2b[i_t, i_p, i_n] = nisa.memset((PMAX, ht, n_width), 0, w2.dtype, mask=(rows >= h_dim) & ragged)
    return w1b, w2b


def _hidden_block(x, xT, w1b, b1T, hb, m0, k_tiles, h_dim):
    """h^T of rows ``m0 ..`` for the hidden tiles of block ``hb``: [H_BLOCK / 128, 128 hidden, 128 rows], the
    instructions of ``fused_widths._hidden_T`` per tile (tiles past H masked off whole, the units past H zero)."""
    i_p, i_r = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    ht = H_BLOCK // PMAX
    hT = nl.ndarray((ht, nl.par_dim(PMAX), PMAX), dtype=x.dtype)
    for jh in range(ht):
        h0 = hb * H_BLOCK + jh * PMAX
        if isinstance(h0, int) and isinstance(h_dim, int) and h0 >= h_dim:
            continue  # (concrete widths: a tile past H)
        ok = (h0 + i_p < h_dim) & (m0 + i_r < x.shape[0])
        acc = nl.ndarray((nl.par_dim(PMAX), PMAX), dtype=nl.float32, buffer=nl.psum)
        acc[i_p, i_r] = nisa.nc_matmul(w1b[0, i_p, jh * PMAX + i_r], xT[0, i_p, i_r], mask=ok)
        for j in nl.affine_range(k_tiles - 1):
            acc[i_p, i_r] += nisa.nc_matmul(w1b[j + 1, i_p, jh * PMAX + i_r], xT[j + 1, i_p, i_r], mask=ok)
        hT[jh, i_p, i_r] = nisa.activation(nl.gelu_apprx_tanh, acc[i_p, i_r], bias=b1T[i_p, hb * ht + jh],
                                           dtype=x.dtype, mask=ok)  # fmt: skip
        hT[jh, i_p, i_r] = nisa.memset((PMAX, PMAX), 0, x.dtype, mask=_below(h0, h_dim, h0 + i_p >= h_dim, i_p))
    return hT


def _block_step(x, w1, w2, b1T, acc, xTs, hb, t0, kt_max, n_width, nb_max):
    """Hidden block ``hb``: its weights, then per tile its h^T and fc2's products added into the tile's accumulators
    (zeroed before the first block: adding to 0.0 is exact, so the sums are the resident kernels')."""
    m_rows, k_dim = x.shape
    h_dim, n_dim = w2.shape
    w1b, w2b = _weight_blocks(w1, w2, hb, kt_max, n_width)
    i_p, i_c, i_m = nl.arange(PMAX)[:, None], nl.arange(BLOCK_N)[None, :], nl.arange(PMAX)[None, :]
    for u, xT in enumerate(xTs):
        m0 = t0 + u * PMAX
        hT = _hidden_block(x, xT, w1b, b1T, hb, m0, math.ceil(k_dim / PMAX), h_dim)
        for c in nl.affine_range(math.ceil(n_dim / BLOCK_N)):
            for jh in range(H_BLOCK // PMAX):
                ok = _below(hb * H_BLOCK + jh * PMAX, h_dim, (m0 + i_p < m_rows) & (c * BLOCK_N + i_c < n_dim), i_p)
                if ok is None:
                    continue
                acc[u * nb_max + c, i_p, i_c] += nisa.nc_matmul(hT[jh, i_p, i_m], w2b[jh, i_p, c * BLOCK_N + i_c],
                                                                 mask=ok)  # fmt: skip


def mlp_streamed(x, w1, b1, w2, b2, residual, out, source):
    """``residual + gelu(x @ w1 + b1) @ w2 + b2``; ``source(m0)`` makes x^T (or LN(x)^T) of rows ``m0 ..``
    (``widths.Rows``, ``widths.LayerNormed``). Concrete or symbolic widths alike (on-chip tensors sized for the
    tops)."""
    from .fused_widths import columns

    m_rows, k_dim = x.shape
    h_dim, n_dim = w2.shape
    kt_max = math.ceil(top(k_dim) / PMAX)
    nb_max = math.ceil(top(n_dim) / BLOCK_N)
    n_width, tb = nb_max * BLOCK_N, token_tiles(top(n_dim))
    b1T = columns(b1, math.ceil(top(h_dim) / H_BLOCK) * (H_BLOCK // PMAX))
    bias = bias_row(b2, n_width)
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(n_width)[None, :]
    i_c = nl.arange(BLOCK_N)[None, :]
    for blk in nl.affine_range(math.ceil(m_rows / (tb * PMAX))):
        t0 = blk * tb * PMAX
        xTs = [source(t0 + u * PMAX) for u in range(tb)]
        rows = []
        for u in range(tb):  # the residual rows, whole rows in one transfer per tile (§3.4)
            yb = nl.ndarray((nl.par_dim(PMAX), n_width), dtype=x.dtype)
            nisa.dma_copy(dst=yb[i_p, i_w], src=residual[t0 + u * PMAX + i_p, i_w],
                          mask=(t0 + u * PMAX + i_p < m_rows) & (i_w < n_dim))  # fmt: skip
            rows.append(yb)
        acc = nl.ndarray((tb * nb_max, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
        i_a, i_p3, i_c3 = nl.arange(tb * nb_max)[None, :, None], nl.arange(PMAX)[:, None, None], nl.arange(BLOCK_N)[
            None, None, :]  # fmt: skip
        acc[i_a, i_p3, i_c3] = nisa.memset((PMAX, tb * nb_max, BLOCK_N), 0, nl.float32)
        for hb in nl.affine_range(math.ceil(h_dim / H_BLOCK)):
            _block_step(x, w1, w2, b1T, acc, xTs, hb, t0, kt_max, n_width, nb_max)
        for u, yb in enumerate(rows):
            m0 = t0 + u * PMAX
            ya = nl.ndarray((nl.par_dim(PMAX), n_width), dtype=x.dtype)
            for c in nl.affine_range(math.ceil(n_dim / BLOCK_N)):  # kernel._epilogue's residual instructions
                ok = (m0 + i_p < m_rows) & (c * BLOCK_N + i_c < n_dim)
                ya[i_p, c * BLOCK_N + i_c] = nisa.tensor_tensor(acc[u * nb_max + c, i_p, i_c],
                                                                bias[i_p, c * BLOCK_N + i_c], np.add, dtype=x.dtype,
                                                                mask=ok)  # fmt: skip
                yb[i_p, c * BLOCK_N + i_c] = nisa.tensor_tensor(ya[i_p, c * BLOCK_N + i_c], yb[i_p, c * BLOCK_N + i_c],
                                                                np.add, dtype=x.dtype, mask=ok,
                                                                engine=nisa.gpsimd_engine)  # fmt: skip
            nl.store(out[m0 + i_p, i_w], value=yb[i_p, i_w], mask=(m0 + i_p < m_rows) & (i_w < n_dim))


# -- the families kernel.toml declares ----------------------------------------------------------------------------


def sbuf_bytes(entry: str, k: int, n: int, itemsize: int, h: int) -> int:
    """SBUF bytes per partition the streamed schedule sized for K = ``k``, N = ``n`` and H = ``h`` needs, one copy of
    each tensor (what the verifier's SBUF rule asks): per token tile x^T and (one at a time) its rows (and LN's
    normalised rows, gamma / beta columns and statistics), h^T of a block and two result rows; one block of each
    weight; b1's columns, b2's row and its broadcast; a memset's [128, 128] tile."""
    kt, s = math.ceil(k / PMAX), itemsize
    width, tb = math.ceil(n / BLOCK_N) * BLOCK_N, token_tiles(n)
    layernorm = entry == "layernorm_mlp"
    rows = (2 if layernorm else 1) * kt * PMAX * s + (2 * kt * s + 1024 if layernorm else 0)
    per_tile = kt * PMAX * s + H_BLOCK * s + 2 * width * s
    weights = kt * H_BLOCK * s + H_BLOCK // PMAX * width * s
    b1 = math.ceil(h / H_BLOCK) * (H_BLOCK // PMAX) * s
    return tb * per_tile + rows + weights + b1 + 2 * width * s + PMAX * s


# A loaded kernel's op executions (grid x loop trip counts, summed over ops) are bounded by the untrusted-IR budget
# (nki.IRBudget.max_iterations), checked at the top of a family's ranges when it is published
MAX_ITERATIONS = 1 << 22


def op_executions(entry: str, m: int, k: int, h: int, n: int) -> int:
    """At least the op executions of the streamed schedule at M = ``m``, K = ``k``, H = ``h``, N = ``n``: per token
    tile and hidden tile fc1's K-tile matmuls and accumulations, fc2's per 512 columns, the activation and memsets;
    per token tile x^T's transposes (LN's statistics per 512 columns), the residual, the epilogue (an upper bound:
    tests/kernels/test_fused_streamed.py measures the traced kernel at every box's top)."""
    kt, nb, tb = math.ceil(k / PMAX), math.ceil(n / BLOCK_N), token_tiles(n)
    tiles = math.ceil(m / (tb * PMAX)) * tb
    hidden = math.ceil(h / H_BLOCK) * (H_BLOCK // PMAX)
    norm = 2 * math.ceil(k / 512) + 16 if entry == "layernorm_mlp" else 0
    return tiles * hidden * (2 * kt + 2 * nb + 8) + tiles * (8 * kt + 8 * nb + 48 + norm)


def boxes(entry: str, itemsize: int, max_k: int, max_h: int, max_m: int = 65536) -> list[tuple[tuple[int, int], ...]]:
    """The streamed families' ranges: ``((K), (H), (N))`` for mlp, ``((K), (H))`` for layernorm_mlp (N is K), H
    1..``max_h`` throughout (the weight blocks' size does not depend on it); one box per token-block width (the N
    ranges over which ``token_tiles`` is one value), K up to the most 128-row tiles that fit SBUF at the box's top
    and keep its op executions at M = ``max_m`` within the untrusted-IR budget."""
    def k_max(n_top, k_cap):
        def fits(k):
            n = k if entry == "layernorm_mlp" else n_top
            return (sbuf_bytes(entry, k, n, itemsize, max_h) <= SBUF_PARTITION_BYTES
                    and op_executions(entry, max_m, k, max_h, n) <= MAX_ITERATIONS)  # fmt: skip

        return max((t * PMAX for t in range(1, k_cap // PMAX + 1) if fits(t * PMAX)), default=0)

    out, lo = [], 1
    for nb in range(1, MAX_N // BLOCK_N + 1):
        hi = nb * BLOCK_N
        if nb < MAX_N // BLOCK_N and token_tiles(hi + BLOCK_N) == token_tiles(hi):
            continue  # the same token block up to the next 512 columns: one box
        if entry == "layernorm_mlp":
            k1 = k_max(hi, min(hi, max_k))
            if k1 >= lo:
                out.append(((lo, k1), (1, max_h)))
        else:
            k1 = k_max(hi, max_k)
            if k1:
                out.append(((1, k1), (1, max_h), (lo, hi)))
        lo = hi + 1
    return out
