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
import operator

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .norm_prologue import LayerNormPrologue

PMAX = 128
BLOCK_N = 512  # one PSUM bank of fp32 per partition: the widest moving tile (reference/nki.md §1.2 TC#2, TC#3)
EPILOGUES = ("none", "bias", "gelu", "residual")
PROLOGUE_TILES = 3  # row tiles computed while the weight streams in
GROUP_TILES = 16  # row tiles pipelined together after the prologue (static code of that many tiles)
ACC_BANKS = 3  # PSUM banks per accumulator set of the streamed prologue (two sets; see _streamed)
WEIGHT_RUN_BYTES = 4096  # per partition per weight load after the first block (the DMA curve's amortised size, §3.4)
ROW_SLOTS = 4  # SBUF row tiles of a pipelined group's results, rotating (a tile's row is rewritten 4 tiles later;
# even, so that two tiles sharing a transfer are in adjacent slots)
ROW_RUN = 4  # full row tiles sharing one residual load and one store where the rows are narrow (two runs of them
# in flight, ``2 * ROW_RUN`` slots, within ROW_SBUF_BUDGET); else pairs
ROW_SBUF_BUDGET = 48 * 1024  # bytes per partition those rows may take (two rings)
Y_SLOTS = 6  # SBUF result slots of a group, rotating: a slot is rewritten 6 blocks after its store was issued


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _static(n):
    """``n`` as an int, or None for a shape family's symbolic count (its rows are a symbol: ``nki.spec(dims=)``)."""
    try:
        return operator.index(n)
    except nki.InconclusiveDimensionError:
        return None


def _x_transposed(x, m0, ok, k_tiles, dtype, by_dma):
    """x^T for rows ``m0 .. m0 + 127``: one [k, 128] SBUF tile per K tile (ragged rows masked). ``by_dma``: DMA
    transposes from HBM (2-byte dtypes); otherwise whole rows in (one efficient DMA) and Tensor-engine transposes
    copied out of PSUM by the Scalar engine, through a ring of two PSUM banks."""
    i_p, i_m = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    xT = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), PMAX), dtype=dtype)
    if by_dma:
        # every K tile in one 3-D DMA transpose (x viewed as [rows, K tiles, 128] -> [128, K tiles, rows]): one
        # transfer's fixed cost instead of one per K tile (reference/nki.md §3.4); a ragged K one tile at a time
        full = len(k_tiles) if x.shape[1] % PMAX == 0 else 0
        if full:
            i_k, i_j = nl.arange(PMAX)[:, None, None], nl.arange(full)[None, :, None]
            i_r = nl.arange(PMAX)[None, None, :]
            src = x.reshape((x.shape[0], full, PMAX))
            xT[i_j, i_k, i_r] = nisa.dma_transpose(src[m0 + i_k, i_j, i_r], axes=(2, 1, 0),
                                                   mask=m0 + i_r < x.shape[0])  # fmt: skip
        for j, (k0, ks) in enumerate(k_tiles[full:], start=full):
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


def _block(x, w_sb, bias, residual, out, xT, ok, m0, acc, ys, n0, ns, k_tiles, epilogue, store=True):
    """One [128, ns] output block: ``K / 128`` matmuls accumulating in PSUM (``acc = (ring, slot)``), then the
    epilogue (``_epilogue``)."""
    ring, slot = acc
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(ns)[None, :]
    for j in range(len(k_tiles)):
        _accumulate(ring, slot, w_sb, xT, ok, j, n0, ns, k_tiles)
    return _epilogue(x, bias, residual, out, ring[slot, i_p, i_c], ok, m0, ys, n0, ns, epilogue, store)


def _accumulate(ring, slot, w_sb, xT, ok, j, n0, ns, k_tiles):
    """K tile ``j``'s matmul into accumulator ``ring[slot]`` (the first one overwrites it)."""
    ks = k_tiles[j][1]
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(ns)[None, :]
    product = nisa.nc_matmul(xT[j, nl.arange(ks)[:, None], nl.arange(PMAX)[None, :]],
                             w_sb.tile(j, ks, n0, ns), mask=ok)  # fmt: skip
    if j == 0:
        ring[slot, i_p, i_c] = product
    else:
        ring[slot, i_p, i_c] += product


def _epilogue(x, bias, residual, out, acc_t, ok, m0, ys, n0, ns, epilogue, store=True):
    """Read accumulator ``acc_t`` out through SBUF slots ``ys = (ring_a, ring_b, slot)`` with the epilogue, and
    store (``store=False``: the caller stores; returns the ring holding the result). (Slots chosen by the caller:
    in straight-line code, tensors the allocator placed on the same bytes would make each block wait for the
    previous block's store.) ``slot`` None: the rings are [128, N] row tiles, ``("row", r)``: rings of them
    (slot r); either way the block goes to its columns, and the caller loads the residual and stores the whole
    row, one transfer each."""
    ya, yb, y_slot = ys
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(ns)[None, :]

    def at(ring):
        if y_slot is None:
            return ring[i_p, n0 + i_c]
        if isinstance(y_slot, tuple):  # ("row", r): row tile r of a ring of [128, N] row tiles
            return ring[y_slot[1], i_p, n0 + i_c]
        return ring[y_slot, i_p, i_c]

    if epilogue == "none":
        at(ya)[...] = nisa.tensor_copy(acc_t, dtype=x.dtype, mask=ok)
    else:
        at(ya)[...] = nisa.tensor_tensor(acc_t, bias[i_p, n0 + i_c], np.add, dtype=x.dtype, mask=ok)
    y = at(ya)
    if epilogue == "gelu":
        at(yb)[...] = nisa.activation(nl.gelu_apprx_tanh, y, dtype=x.dtype, mask=ok)
        y = at(yb)
    elif epilogue == "residual":  # the residual straight into the result slot (no shared temporary to wait on)
        if not (y_slot is None or isinstance(y_slot, tuple)):  # whole rows: the caller loaded the residual row
            nisa.dma_copy(dst=at(yb), src=residual[m0 + i_p, n0 + i_c], mask=ok)
        at(yb)[...] = nisa.tensor_tensor(y, at(yb), np.add, dtype=x.dtype, mask=ok, engine=nisa.gpsimd_engine)
        y = at(yb)
    if store:
        nl.store(out[m0 + i_p, n0 + i_c], value=y, mask=ok)
    return ya if epilogue in ("none", "bias") else yb


def _weight_runs(n_blocks, itemsize):
    """``{first column: columns}`` of the weight loads: the first block alone (the Tensor engine starts as soon as
    it has arrived), then runs of blocks of >= 4 KiB per partition, so a load's ~1.3 us fixed cost hides behind
    its streaming (reference/nki.md §3.4) instead of each 1 KiB block paying it."""
    per = max(1, math.ceil(WEIGHT_RUN_BYTES / (BLOCK_N * itemsize)))
    firsts = [0] + list(range(1, len(n_blocks), per))
    ends = firsts[1:] + [len(n_blocks)]
    return {n_blocks[a][0]: n_blocks[b - 1][0] + n_blocks[b - 1][1] - n_blocks[a][0] for a, b in zip(firsts, ends)}


def _load_weight(w, w_sb, k_tiles, c0, cs, tiles=None, dst0=None):
    """Columns ``c0 .. c0 + cs`` of K tiles ``tiles`` (default: all) of the weight into ``w_sb``, several whole
    K tiles per transfer (a 3-D access [128, tiles, cs]) so that each moves >= 4 KiB per partition
    (reference/nki.md §3.4); a ragged last K tile alone. They land in columns ``dst0 ..`` of ``w_sb`` (default
    ``c0``: ``w_sb`` holds every column; 0: a tensor of the chunk alone)."""
    tiles = range(len(k_tiles)) if tiles is None else tiles
    d0 = c0 if dst0 is None else dst0
    full = [j for j in tiles if k_tiles[j][1] == PMAX]
    per = max(1, math.ceil(WEIGHT_RUN_BYTES / (cs * np.dtype(w.dtype).itemsize)))
    i_p, i_c = nl.arange(PMAX)[:, None, None], nl.arange(cs)[None, None, :]
    for a in range(0, len(full), per):
        j0, n = full[a], len(full[a:a + per])
        i_j = nl.arange(n)[None, :, None]
        nisa.dma_copy(dst=w_sb[j0 + i_j, i_p, d0 + i_c], src=w[(j0 + i_j) * PMAX + i_p, c0 + i_c])
    for j in tiles:
        k0, ks = k_tiles[j]
        if ks != PMAX:
            i_k, i_c2 = nl.arange(ks)[:, None], nl.arange(cs)[None, :]
            w_sb[j, i_k, d0 + i_c2] = nl.load(w[k0 + i_k, c0 + i_c2])


class ChunkedWeight:
    """A weight [K, N] kept in SBUF as column chunks, each an SBUF tensor of its own ([K tiles, 128, columns]),
    loaded chunk by chunk (``load``: ``_load_weight``, several K tiles per transfer). In one [K tiles, 128, N]
    tensor a partition's bytes run K tile by K tile, so a transfer of K tiles j.. and columns c0.. spans bytes of
    tile j's later columns too, and the matmuls of an early chunk would wait for a later chunk's transfer (the
    Tensor engine idle until the whole weight is in). Every matmul reads inside one chunk (``tile``)."""

    def __init__(self, w, k_tiles):
        self.w, self.k_tiles, self.chunks = w, k_tiles, []

    def load(self, c0, cs):
        """Columns ``c0 .. c0 + cs - 1`` as the next chunk."""
        sb = nl.ndarray((len(self.k_tiles), nl.par_dim(PMAX), cs), dtype=self.w.dtype)
        _load_weight(self.w, sb, self.k_tiles, c0, cs, dst0=0)
        self.chunks.append((c0, cs, sb))

    def tile(self, j, ks, col0, width):
        """Rows of K tile ``j`` (``ks`` of them), columns ``col0 .. col0 + width - 1`` (within one chunk)."""
        c0, cs, sb = max((c for c in self.chunks if c[0] <= col0), key=lambda c: c[0])
        if col0 + width > c0 + cs:
            raise ValueError(f"weight columns {col0}..{col0 + width - 1} straddle the chunk {c0}..{c0 + cs - 1}")
        return sb[j, nl.arange(ks)[:, None], col0 - c0 + nl.arange(width)[None, :]]


def _row_rings(out, residual, m0, ok, epilogue):
    """A row tile's two [128, N] result tiles (``_epilogue`` with slot None), the residual rows loaded into the
    second in one transfer: the whole row in and out at once, one fixed cost each instead of one per 512-column
    block (reference/nki.md §3.4)."""
    i_p, i_n = nl.arange(PMAX)[:, None], nl.arange(out.shape[1])[None, :]
    ya, yb = (nl.ndarray((nl.par_dim(PMAX), out.shape[1]), dtype=out.dtype) for _ in range(2))
    if epilogue == "residual":
        nisa.dma_copy(dst=yb[i_p, i_n], src=residual[m0 + i_p, i_n], mask=ok)
    return ya, yb


def _store_rows(out, row, m0, ok):
    """Store a row tile's [128, N] result in one transfer."""
    i_p, i_n = nl.arange(PMAX)[:, None], nl.arange(out.shape[1])[None, :]
    nl.store(out[m0 + i_p, i_n], value=row[i_p, i_n], mask=ok)


def _streamed(x, w, w_sb, bias, residual, out, epilogue, heads, xTs, k_tiles, n_blocks):
    """The first row tiles (``heads``, their x^T in ``xTs``) while the weight streams in: column groups of
    ``ACC_BANKS // len(heads)`` blocks, every head tile's accumulators of a group in PSUM at once, and the K
    tiles in the outer loop, so each [k, group] piece of the weight is used as soon as it has arrived (the
    Tensor engine starts after the first piece, not after a whole block or the whole weight), and a group's
    weight rows are ``group * 512`` columns long (fewer, larger DMA descriptors). Accumulators alternate between
    two sets of banks, so group g+1 accumulates while group g is read out."""
    per = max(1, ACC_BANKS // len(heads))
    if len(heads) * len(n_blocks) <= 2 * ACC_BANKS:  # one group takes every accumulator: no second set needed
        per = len(n_blocks)
    groups = [n_blocks[g:g + per] for g in range(0, len(n_blocks), per)]
    sets = [nl.ndarray((len(heads) * per, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
            for _ in range(min(2, len(groups)))]  # fmt: skip
    rows = [_row_rings(out, residual, m0, ok, "none") for m0, ok in heads]
    # the weight: the first group's columns, then the rest of every row (several K tiles per transfer, so each
    # moves >= 4 KiB per partition): the Tensor engine starts on the first group while the rest streams in
    first_cols = groups[0][-1][0] + groups[0][-1][1]
    w_sb.load(0, first_cols)
    if first_cols < w.shape[1]:
        w_sb.load(first_cols, w.shape[1] - first_cols)
    if epilogue == "residual":  # the residual rows after the weight in DMA order (only the epilogue needs them)
        i_p, i_n = nl.arange(PMAX)[:, None], nl.arange(out.shape[1])[None, :]
        for (m0, ok), (_, yb) in zip(heads, rows):
            nisa.dma_copy(dst=yb[i_p, i_n], src=residual[m0 + i_p, i_n], mask=ok)
    for g, blocks in enumerate(groups):
        acc = sets[g % len(sets)]
        for j in range(len(k_tiles)):
            for u, ((_, ok), xT) in enumerate(zip(heads, xTs)):
                for b, (n0, ns) in enumerate(blocks):
                    _accumulate(acc, u * per + b, w_sb, xT, ok, j, n0, ns, k_tiles)
        for u, (m0, ok) in enumerate(heads):
            for b, (n0, ns) in enumerate(blocks):
                acc_t = acc[u * per + b, nl.arange(PMAX)[:, None], nl.arange(ns)[None, :]]
                _epilogue(x, bias, residual, out, acc_t, ok, m0, (*rows[u], None), n0, ns, epilogue, store=False)
    ring = 0 if epilogue in ("none", "bias") else 1  # the tile _epilogue leaves the result in
    for u, (m0, ok) in enumerate(heads):  # each row tile's whole result in one transfer
        _store_rows(out, rows[u][ring], m0, ok)


def _y_rings(slots, dtype):
    return tuple(nl.ndarray((slots, nl.par_dim(PMAX), BLOCK_N), dtype=dtype) for _ in range(2))


def _ok(x, m0):
    return m0 + nl.arange(PMAX)[:, None] < x.shape[0]


def _bias_rows(b, n_dim, n_blocks, row=None):
    """The bias spread over the 128 partitions, [128, N]. With ``row`` (``_bias_row(b)``, loaded earlier): the row
    broadcast on the Tensor engine (``ones^T @ row``, reference/nki.md §2.4: a partition broadcast is a matmul
    with ones), for shapes whose DMA queues bind; otherwise a broadcast DMA, which moves 128 copies of the row but
    costs the Tensor engine nothing."""
    if row is None:
        return nl.load(b.reshape((1, n_dim))).broadcast_to((PMAX, n_dim))
    ones = nl.full((nl.par_dim(1), PMAX), 1.0, dtype=b.dtype)
    bias = nl.ndarray((nl.par_dim(PMAX), n_dim), dtype=b.dtype)
    ps = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)  # matmul n+1 while n is copied
    i_p = nl.arange(PMAX)[:, None]
    for blk, (n0, ns) in enumerate(n_blocks):
        i_c = nl.arange(ns)[None, :]
        ps[blk % 2, i_p, i_c] = nisa.nc_matmul(ones, row[0, n0 + i_c])
        bias[i_p, n0 + i_c] = nisa.activation(nl.copy, ps[blk % 2, i_p, i_c], dtype=b.dtype)
    return bias


def _bias_row(b):
    """The bias as one [1, N] row on one partition (a single descriptor)."""
    row = nl.ndarray((nl.par_dim(1), b.shape[0]), dtype=b.dtype)
    nisa.dma_copy(dst=row[0, nl.arange(b.shape[0])[None, :]], src=b.reshape((1, b.shape[0]))[0, nl.arange(
        b.shape[0])[None, :]])  # fmt: skip
    return row


def _tiles(x, w, bias, residual, out, epilogue, src, first, count, k_tiles, n_blocks, ready=None, all_full=False):
    """Row tiles ``first .. first + count - 1`` (``first`` may be a loop index; ``ready``: the first tile's
    ``src.stage1`` state if the caller made it earlier), software-pipelined one tile ahead: in program order,
    tile u+1's loads and row work (``stage1``), tile u's matmuls and epilogue, then tile u+1's Tensor-engine part
    (``stage2``). Every engine runs in order, so the Vector and Scalar engines prepare tile u+1 while the Tensor
    engine multiplies tile u, and the Tensor engine finds tile u+1's inputs ready when it gets to them. PSUM
    accumulators, SBUF result slots and the x sources' buffers rotate over rings owned by the group (buffers the
    allocator shared by program order would make each tile wait for the previous one). ``all_full``: every tile
    of the group is a whole 128 rows (the caller knows it when ``first`` is a loop index)."""
    ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
    n_dim = out.shape[1]
    # whole result rows in SBUF (a ring of ROW_SLOTS row tiles: one store, and one residual load, per tile) where
    # they fit ROW_SBUF_BUDGET; otherwise 512-column slots, one store per block
    by_row = len(n_blocks) > 1 and 2 * ROW_SLOTS * n_dim * np.dtype(x.dtype).itemsize <= ROW_SBUF_BUDGET
    row_bytes = n_dim * np.dtype(x.dtype).itemsize
    run = ROW_RUN if 2 * 2 * ROW_RUN * row_bytes <= ROW_SBUF_BUDGET else 2
    if by_row:
        slots = min(2 * run, -(-count // run) * run)  # a multiple of the run: a run's tiles take adjacent slots
        ya, yb = (nl.ndarray((slots, nl.par_dim(PMAX), n_dim), dtype=x.dtype) for _ in range(2))
        i_p, i_n = nl.arange(PMAX)[:, None], nl.arange(n_dim)[None, :]
    else:
        slots = min(Y_SLOTS, count * len(n_blocks))
        ya, yb = _y_rings(slots, x.dtype)
    bufs = src.ring(2)
    tiles = [((first + u) * PMAX, _ok(x, (first + u) * PMAX)) for u in range(count)]
    # Runs of up to ``run`` full row tiles share one residual load and one store ([128, tiles, N]: one fixed cost
    # for all, reference/nki.md §3.4; a 128-row tile of 768 bf16 columns is 1.5 KiB per partition, which would
    # stream for well under the fixed cost), in adjacent ring slots; ``full(u)``: tile u is known to be a whole
    # 128 rows. ``runs``: a run's first tile -> its tiles (at least 2); ``lead``: each tile of a run -> its first.
    def full(u):
        return all_full or (isinstance(first, int) and (first + u + 1) * PMAX <= x.shape[0])

    runs = {}
    for u in range(0, count, run) if by_row else ():
        n = 0
        while n < min(run, count - u) and full(u + n):
            n += 1
        if n >= 2:
            runs[u] = n
    lead = {u + i: u for u, n in runs.items() for i in range(n)}
    xT = src.stage2(src.stage1(bufs, 0, *tiles[0]) if ready is None else ready)
    turn = 0
    for u, (m0, ok) in enumerate(tiles):
        ahead = src.stage1(bufs, (u + 1) % 2, *tiles[u + 1]) if u + 1 < count else None
        if by_row and epilogue == "residual" and u in runs:
            _run_rows(yb, u % slots, residual, m0, runs[u], load=True)
        elif by_row and epilogue == "residual" and u not in lead:
            nisa.dma_copy(dst=yb[u % slots, i_p, i_n], src=residual[m0 + i_p, i_n], mask=ok)
        for n0, ns in n_blocks:
            ys = (ya, yb, ("row", u % slots) if by_row else turn % slots)
            y = _block(x, w, bias, residual, out, xT, ok, m0, (ring, turn % 2), ys, n0, ns, k_tiles, epilogue,
                       store=not by_row)  # fmt: skip
            turn += 1
        if by_row and u in lead and u == lead[u] + runs[lead[u]] - 1:  # a run's last tile: the run's rows out
            _run_rows(y, lead[u] % slots, out, tiles[lead[u]][0], runs[lead[u]], load=False)
        elif by_row and u not in lead:
            nl.store(out[m0 + i_p, i_n], value=y[u % slots, i_p, i_n], mask=ok)
        if ahead is not None:
            xT = src.stage2(ahead)


def _run_rows(ring, slot, hbm, m0, n, load):
    """Rows ``m0 .. m0 + 128 n - 1`` of ``hbm`` to (``load``) or from slots ``slot .. slot + n - 1`` of ``ring``
    [slots, 128, N] in one transfer (partition p holds rows m0 + p, m0 + 128 + p, ..). Every tile must be full."""
    i_p, i_t, i_n = nl.arange(PMAX)[:, None, None], nl.arange(n)[None, :, None], nl.arange(hbm.shape[1])[None, None, :]
    if load:
        nisa.dma_copy(dst=ring[slot + i_t, i_p, i_n], src=hbm[m0 + i_t * PMAX + i_p, i_n])
    else:
        nisa.dma_copy(dst=hbm[m0 + i_t * PMAX + i_p, i_n], src=ring[slot + i_t, i_p, i_n])


def _linear(x, w, b, residual, out, epilogue, src):
    """The kernel body. x^T of rows ``m0 .. m0 + 127`` comes from ``src`` in two parts: ``src.stage1(bufs, slot,
    m0, ok)`` (DMA and Vector/Scalar work, into slot ``slot`` of buffers from ``src.ring(n)``) returns a state
    that ``src.stage2`` (Tensor-engine work) turns into the x^T tiles."""
    m_rows, k_dim = x.shape
    n_dim = w.shape[1]
    k_tiles, n_blocks = _chunks(k_dim, PMAX), _chunks(n_dim, BLOCK_N)
    n_tiles = math.ceil(m_rows / PMAX)
    w_sb = ChunkedWeight(w, k_tiles)  # the whole weight, kept in SBUF
    # Accumulators rotate over two PSUM banks, so block n+1 accumulates while block n is read out (a fresh tensor
    # per block would share one bank with the last and wait for its copy).
    # Prologue: the first PROLOGUE_TILES row tiles, block by block, each weight block loaded just before its
    # matmuls: the Tensor engine starts when the first block has arrived, and has PROLOGUE_TILES tiles of work
    # per block while the next one streams in (instead of idling until the whole weight is in SBUF).
    first = min(PROLOGUE_TILES, n_tiles)
    bias = row = None
    if first < n_tiles and epilogue != "none":
        bias = _bias_rows(b, n_dim, n_blocks)
    elif epilogue != "none":
        # every tile is a prologue tile (the weight's DMA binds): the bias broadcast on the Tensor engine, its row
        # loaded first, broadcast after the first tile's row work (program order places the buffers so that
        # neither waits for the other)
        row = _bias_row(b)
    # A residual with narrow rows (several column blocks, but a row tile under the 4 KiB per partition at which a
    # transfer streams for longer than its ~1.3 us fixed cost, reference/nki.md §3.4): the prologue tiles' results
    # are whole rows ([first, 128, N], the same bytes as a slot per block). They are full tiles (more follow), so
    # their residual rows come in one transfer and their results go out in one after the last block, instead of
    # one of each per tile and block. (Without a residual to load, the store per block is as fast or faster:
    # measured on the ViT-B/16 matmuls at batch 8, trn2, one store at the end made QKV 94.0 -> 98.9 us, fc2
    # 131.1 -> 132.7 us.)
    row_bytes = n_dim * np.dtype(x.dtype).itemsize
    head_rows = epilogue == "residual" and len(n_blocks) > 1 and row_bytes < WEIGHT_RUN_BYTES
    if first < n_tiles:
        ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
        if head_rows:
            ya, yb = (nl.ndarray((first, nl.par_dim(PMAX), n_dim), dtype=x.dtype) for _ in range(2))
        else:
            ya, yb = _y_rings(first * len(n_blocks), x.dtype)
    heads = [(u * PMAX, _ok(x, u * PMAX)) for u in range(first)]
    full, rest = divmod(n_tiles - first, GROUP_TILES)
    if not src.pipelined:
        full = rest = 0
    static_rest = _static(rest)  # None: a shape family's row count, whose last tiles go one per loop iteration
    # The prologue tiles' x^T, each tile's row work one tile ahead of the previous tile's Tensor-engine part (so
    # the in-order engines overlap the tiles' chains), and the first tile of a static rest group's row work too
    # (it is then ready when the Tensor engine leaves the prologue).
    bufs = src.ring(first + 1)
    states = [src.stage1(bufs, 0, *heads[0])]
    xTs = []
    if row is not None:
        bias = _bias_rows(b, n_dim, n_blocks, row)
    for u in range(first):
        if u + 1 < first:
            states.append(src.stage1(bufs, u + 1, *heads[u + 1]))
        elif static_rest and not full:
            states.append(src.stage1(bufs, first, first * PMAX, _ok(x, first * PMAX)))
        xTs.append(src.stage2(states[u]))
    ready = states[first] if len(states) > first else None
    if first == n_tiles:  # every tile is a prologue tile: the weight's DMA binds (see _streamed)
        _streamed(x, w, w_sb, bias, residual, out, epilogue, heads, xTs, k_tiles, n_blocks)
        return
    turn = 0
    runs = _weight_runs(n_blocks, np.dtype(w.dtype).itemsize)
    if head_rows and epilogue == "residual":
        _run_rows(yb, 0, residual, 0, first, load=True)
    for n0, ns in n_blocks:
        if n0 in runs:  # the weight's next run of blocks, just before its first block's matmuls
            w_sb.load(n0, runs[n0])
        for u, ((m0, ok), xT) in enumerate(zip(heads, xTs)):
            ys = (ya, yb, ("row", u) if head_rows else turn)
            y = _block(x, w_sb, bias, residual, out, xT, ok, m0, (ring, turn % 2), ys, n0, ns, k_tiles, epilogue,
                       store=not head_rows)  # fmt: skip
            turn += 1
    if head_rows:
        _run_rows(y, 0, out, 0, first, load=False)
    if not src.pipelined:  # x^T by DMA: nothing to prepare ahead; one tile per iteration of an affine loop
        for m in nl.affine_range(n_tiles - first):
            m0 = (m + first) * PMAX
            ok = _ok(x, m0)
            xT = src.stage1(None, 0, m0, ok)
            tile_ring = nl.ndarray((2, nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
            ta, tb = _row_rings(out, residual, m0, ok, epilogue)
            for blk, (n0, ns) in enumerate(n_blocks):
                y = _block(x, w_sb, bias, residual, out, xT, ok, m0, (tile_ring, blk % 2), (ta, tb, None), n0, ns,
                           k_tiles, epilogue, store=False)  # fmt: skip
            _store_rows(out, y, m0, ok)
        return
    if static_rest is None:
        _family_tail(x, w_sb, bias, residual, out, epilogue, src, first, n_tiles, k_tiles, n_blocks)
        return
    # The other tiles in groups of GROUP_TILES (an affine loop over full groups, then the static rest).
    # whole tiles unless the last group holds a ragged last tile
    all_full = static_rest > 0 or _static(m_rows % PMAX) == 0
    for g in nl.affine_range(full):
        _tiles(x, w_sb, bias, residual, out, epilogue, src, first + g * GROUP_TILES, GROUP_TILES, k_tiles, n_blocks,
               all_full=all_full)  # fmt: skip
    if static_rest:
        _tiles(x, w_sb, bias, residual, out, epilogue, src, first + full * GROUP_TILES, rest, k_tiles, n_blocks,
               ready)  # fmt: skip


def _family_tail(x, w_sb, bias, residual, out, epilogue, src, first, n_tiles, k_tiles, n_blocks):
    """The tiles after the prologue of a shape family, whose tile count is symbolic (``nki.spec(dims=)``): full groups
    of GROUP_TILES whole tiles, then a tail of 1..GROUP_TILES tiles that keeps the last (possibly ragged) one, as
    loops, since no count is static: pairs of whole tiles (one residual load and one store per pair, pipelined
    within the pair), the one whole tile left over if the count is even, and the last tile alone, masked. A concrete
    trace pipelines its static rest as one group instead."""
    full = (n_tiles - first - 1) // GROUP_TILES
    tail = n_tiles - first - full * GROUP_TILES  # 1..GROUP_TILES
    for g in nl.affine_range(full):
        _tiles(x, w_sb, bias, residual, out, epilogue, src, first + g * GROUP_TILES, GROUP_TILES, k_tiles, n_blocks,
               all_full=True)  # fmt: skip
    base = first + full * GROUP_TILES
    pairs = (tail - 1) // 2
    for p in nl.affine_range(pairs):
        _tiles(x, w_sb, bias, residual, out, epilogue, src, base + 2 * p, 2, k_tiles, n_blocks, all_full=True)
    for s in nl.affine_range(tail - 1 - 2 * pairs):  # 0 or 1 whole tile
        _tiles(x, w_sb, bias, residual, out, epilogue, src, base + 2 * pairs + s, 1, k_tiles, n_blocks, all_full=True)
    _tiles(x, w_sb, bias, residual, out, epilogue, src, n_tiles - 1, 1, k_tiles, n_blocks)


class _DmaTransposed:
    """x^T straight from HBM (``_x_transposed``): all in stage 1, no buffers of its own. (Measured: the
    one-tile-ahead groups are slower for it than one tile per affine iteration, e.g. 54.9 vs 46.7 us for the ViT-B
    proj linear with its residual at 1576 rows on trn2.)"""

    pipelined = False

    def __init__(self, x):
        self.x, self.k_tiles, self.by_dma = x, _chunks(x.shape[1], PMAX), transpose_by_dma(x.dtype)

    def ring(self, n):
        return None

    def stage1(self, bufs, slot, m0, ok):
        return _x_transposed(self.x, m0, ok, self.k_tiles, self.x.dtype, self.by_dma)

    def stage2(self, xT):
        return xT


class _RowsTransposed:
    """x^T by the Tensor engine: whole rows in (one DMA per tile, straight into a ring slot; descriptors as long as
    a row, against the 256 B of a DMA transpose's), transposed block by block, copied out of PSUM by the Scalar
    engine. Pipelined one tile ahead (``_tiles``), so the in-order Tensor engine finds each tile's rows loaded."""

    pipelined = True

    def __init__(self, x):
        self.x, self.k_tiles = x, _chunks(x.shape[1], PMAX)

    def ring(self, n):
        return nl.ndarray((n, nl.par_dim(PMAX), self.x.shape[1]), dtype=self.x.dtype)

    def stage1(self, rows_sb, slot, m0, ok):
        i_p, i_f = nl.arange(PMAX)[:, None], nl.arange(self.x.shape[1])[None, :]
        nisa.dma_copy(dst=rows_sb[slot, i_p, i_f], src=self.x[m0 + i_p, i_f], mask=ok)
        return m0, rows_sb[slot, i_p, i_f]

    def stage2(self, state):
        m0, rows = state
        i_p, i_m = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
        cols_ok = m0 + i_m < self.x.shape[0]
        xT = nl.ndarray((len(self.k_tiles), nl.par_dim(PMAX), PMAX), dtype=self.x.dtype)
        t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=self.x.dtype, buffer=nl.psum)
        for j, (k0, ks) in enumerate(self.k_tiles):
            i_k = nl.arange(ks)[:, None]
            t_ps[j % 2, i_k, i_m] = nisa.nc_transpose(rows[i_p, k0 + nl.arange(ks)[None, :]], mask=cols_ok)
            xT[j, i_k, i_m] = nisa.activation(nl.copy, t_ps[j % 2, i_k, i_m], mask=cols_ok)
        return xT


X_SOURCES = {"dma": _DmaTransposed, "rows": _RowsTransposed}
# DMA bytes per Tensor-engine cycle at which a linear turns DMA-bound, trn2: 368 GB/s of DMA (reference/nki.md
# §3.4) over the 2.4 GHz Tensor clock (§1.1) = 153 B/cycle. A kernel-design threshold for choose_x_source, not a
# cost-model constant.
DMA_BYTES_PER_TENSOR_CYCLE = 153


def choose_x_source(m: int, k: int, n: int, itemsize: int, epilogue: str) -> str:
    """``"rows"`` (x^T on the Tensor engine; cheaper DMA) for shapes the DMA binds, ``"dma"`` (DMA transposes; the
    Tensor engine only multiplies) for shapes the Tensor engine binds, by a shape-only estimate: the matmul cycles
    (``max(N_moving, 64)`` per K tile, row tile and 512-column block, §2.3) against the bytes moved with x^T by DMA
    transpose (its 256 B descriptors run at about half the efficiency of row loads, §3.4: counted twice). Measured
    on the ViT-B/16 linears at 197 and 1576 rows (benchmarks/vit.py): picks the faster source for every one. Only
    2-byte dtypes have the choice (DMA transposes take nothing else)."""
    if itemsize != 2:
        return "rows"
    cycles = math.ceil(m / PMAX) * math.ceil(k / PMAX) * n
    traffic = itemsize * (k * n + 2 * m * k + m * n * (2 if epilogue == "residual" else 1))
    return "rows" if traffic > DMA_BYTES_PER_TENSOR_CYCLE * cycles else "dma"


class _LayerNormed:
    """``LN(x)^T`` (``norm_prologue``): rows, statistics and normalisation in stage 1, into a ring slot; the
    Tensor-engine transposes (with gamma and beta in their PSUM copies) in stage 2."""

    pipelined = True

    def __init__(self, x, gamma, beta, epsilon):
        self.x, self.k_tiles = x, _chunks(x.shape[1], PMAX)
        self.norm = LayerNormPrologue(x, gamma, beta, epsilon, self.k_tiles)

    def ring(self, n):
        return self.norm.ring(n, PMAX)

    def stage1(self, bufs, slot, m0, ok):
        return m0, self.norm.normalise(bufs, slot, m0, PMAX, ok)[1]

    def stage2(self, state):
        m0, z = state
        xT = nl.ndarray((len(self.k_tiles), nl.par_dim(PMAX), PMAX), dtype=self.x.dtype)
        self.norm.transpose(z, PMAX, xT, 0, m0 + nl.arange(PMAX)[None, :] < self.x.shape[0])
        return xT


def resident_sbuf_bytes(m: int, k: int, n: int, itemsize: int, epilogue: str, x_source: str) -> int:
    """SBUF bytes per partition ``_linear``'s schedule takes at most (no tensor's bytes reused for another's): the
    weight, the bias row and its broadcast, then every buffer of the prologue (its row tiles' rows, x^T and result
    slots, or ``_streamed``'s result rows when every tile is a prologue tile) and of the groups after it (their rows
    ring, x^T of the tile and the one ahead, result slots or rows), as if all were live at once. Above a partition's
    SBUF the kernel runs the width families' schedule instead (``fits_resident``)."""
    kt, nb, n_tiles = math.ceil(k / PMAX), math.ceil(n / BLOCK_N), math.ceil(m / PMAX)
    first = min(PROLOGUE_TILES, n_tiles)
    rows = k * itemsize if x_source == "rows" else 0  # one tile's rows in SBUF (x^T by DMA transpose: none)
    xT = kt * PMAX * itemsize
    total = kt * n * itemsize + (2 * n * itemsize + PMAX * itemsize if epilogue != "none" else 0)
    total += (first + 1) * rows + first * xT
    if first == n_tiles:  # _streamed: two [128, N] result rows per prologue tile
        return total + 2 * first * n * itemsize
    total += 2 * max(first * nb * BLOCK_N, first * n) * itemsize  # the prologue's result slots (or rows)
    row_bytes = n * itemsize
    run = ROW_RUN if 2 * 2 * ROW_RUN * row_bytes <= ROW_SBUF_BUDGET else 2
    by_row = nb > 1 and 2 * ROW_SLOTS * row_bytes <= ROW_SBUF_BUDGET
    slots = 2 * (2 * run * n if by_row else Y_SLOTS * BLOCK_N) * itemsize  # a group's result rings (_tiles)
    tile_rows = 2 * n * itemsize  # the DMA source's loop: one tile's two result rows (_row_rings)
    return total + 2 * rows + 3 * xT + max(slots, tile_rows)


def fits_resident(m, k, n, itemsize: int, epilogue: str, x_source: str) -> bool:
    """Whether ``_linear``'s schedule surely fits a trn2 partition's SBUF (``resident_sbuf_bytes``). Where it may
    not, near the top of a width family's box (e.g. float32 K 1152 x N 5120: the prologue's result slots and x rows
    beside a 180 KiB weight), the concrete kernel runs the width family's own schedule (``widths.linear_widths``: one
    row tile at a time, sized by ``widths.sbuf_bytes``, which every box fits), so that every shape the launcher
    accepts runs, as the Hub's family instance of that shape does, with the same numbers."""
    from .widths import SBUF_PARTITION_BYTES

    return resident_sbuf_bytes(m, k, n, itemsize, epilogue, x_source) <= SBUF_PARTITION_BYTES


@nki.jit
def linear_kernel(x, w, b=None, residual=None, epilogue="none", x_source="auto"):
    """``x_source``: how x^T is made, ``"dma"`` (``_DmaTransposed``; by DMA transpose for 2-byte dtypes),
    ``"rows"`` (``_RowsTransposed``, on the Tensor engine) or ``"auto"`` (``choose_x_source``); a shape family over
    K or N makes x^T one way (``widths.Rows``)."""
    out = nl.ndarray((x.shape[0], w.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    if _static(x.shape[1]) is None or _static(w.shape[1]) is None:  # a shape family over the widths
        from .widths import Rows, linear_widths

        linear_widths(x, w, b, residual, out, epilogue, Rows(x))
        return out
    if x_source == "auto":
        x_source = choose_x_source(x.shape[0], x.shape[1], w.shape[1], np.dtype(x.dtype).itemsize, epilogue)
    if _static(x.shape[0]) is not None and not fits_resident(x.shape[0], x.shape[1], w.shape[1],
                                                             np.dtype(x.dtype).itemsize, epilogue, x_source):
        from .widths import Rows, linear_widths

        linear_widths(x, w, b, residual, out, epilogue, Rows(x))
        return out
    _linear(x, w, b, residual, out, epilogue, X_SOURCES[x_source](x))
    return out


@nki.jit
def layernorm_linear_kernel(x, gamma, beta, w, b=None, epsilon=1e-6, epilogue="none"):
    """``LN(x) @ w (+ b, then GELU)``: the LayerNorm of each row as the prologue (``norm_prologue``), its
    transposed result straight into the matmuls, the normalised rows never in HBM."""
    out = nl.ndarray((x.shape[0], w.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    if _static(x.shape[1]) is None or _static(w.shape[1]) is None:  # a shape family over the widths
        from .widths import LayerNormed, linear_widths

        linear_widths(x, w, b, None, out, epilogue, LayerNormed(x, gamma, beta, epsilon))
        return out
    _linear(x, w, b, None, out, epilogue, _LayerNormed(x, gamma, beta, epsilon))
    return out
