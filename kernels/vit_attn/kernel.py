"""The vit-attn kernels: bidirectional multi-head attention ``softmax(scale * q k^T) v`` for vision transformers.

Two HBM layouts, one per-head body (``_head``) that sees only on-chip operands:

* ``attention_kernel(q, k, v)``: q, k, v, out are ``(batch, heads, seq, head_dim)`` (PyTorch SDPA layout). A head
  is contiguous in HBM but each row is only head_dim long, so q^T and k^T come in by DMA transpose and V by plain
  row loads, each transfer moving a group of heads at once (``_bhsd_group``).
* ``attention_qkv_kernel(qkv)``: the fused QKV projection's ``(batch, seq, 3 * heads * head_dim)`` in and
  ``(batch, seq, heads * head_dim)`` out. Whole rows are loaded (kilobytes per partition, so each DMA runs at full
  efficiency, reference/nki.md §3.4), head h's q/k/v are column slices of them on chip: q^T and k^T by Tensor-
  engine transposes, V read in place as the moving operand of P V. The output rows of all heads are assembled in
  SBUF and stored once per row tile. No permute kernel, no HBM round trip. If a batch element's rows do not fit
  the SBUF budget the kernel reads per-head slices by DMA transpose instead (``rows_fit``).

Per 128-row query tile (rows on partitions; the ragged last tile carries ``mask=(row < seq)`` on every op, HBM is
never padded):

1. ``scale`` is folded into K^T once per head (in the copy that brings it on chip, or one ScalarE pass), so the
   scores in PSUM are already scaled and ``-max`` is the exp bias as it comes out of the Vector reduce.
2. Scores ``q (scale k)^T`` go to PSUM in chunks of at most 512 columns (one bank each).
3. Resident strip (``strategy="resident"``): all chunks of the tile stay in PSUM; the Vector engine takes the exact
   row max, and one Scalar-engine ``activation`` per chunk computes ``exp(s - max)`` from PSUM into the
   probability strip in SBUF with the row sum fused into the same instruction (``reduce_op=add``): max
   subtraction, exp and sum cost one ScalarE pass over the scores.
   Flash (``strategy="flash"``, sequences whose strip does not fit): key blocks of 512 in a ``sequential_range``
   with the online-softmax rescaling (running max ``m``, sum ``l``, output ``o`` in SBUF; ``alpha = exp(m_old -
   m_new)``).
4. P is transposed in [128, <=128] blocks on the Tensor engine, copied PSUM->SBUF, and ``P^T`` is the stationary
   operand of ``P V``: the short V tile [keys, d] streams as the moving operand (max(64, d) cycles instead of 128,
   §3.2: the short operand should move).
5. The division by the row sum is delayed to the [128, d] result (FlashAttention-2): one Vector divide.

PSUM->SBUF copies (transposes) go round robin to the engines in ``evict``: the Vector engine already carries the
row max and the Scalar engine the exp, so spreading the copies balances the two (measured in benchmarks/vit.py).
"""

from __future__ import annotations

import math
import operator

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

PMAX = 128  # partitions (reference/nki.md §1.2 TC#1)
BANK = 512  # fp32 columns of one PSUM bank, the largest moving tile (§1.2 TC#2, TC#3)
RESIDENT_MAX_SEQ = 3 * BANK  # score chunks kept in PSUM at once: 3 of the 8 banks (see _Group.ring)
FLASH_BLOCK = BANK  # keys per online-softmax block
FLASH_INTERLEAVE = 4  # query tiles whose key blocks the flash loop interleaves (PSUM: a score bank per tile, one
# bank for their accumulators, two transposes)
# Query tiles per pipelined group and the SBUF their buffers may take per partition (heads_per_group). Measured
# on trn2 bf16 (benchmarks/vit.py): ViT-B/16 attention at batch 8 100.9 us with groups of 8 tiles, 95.8 us with
# 24 (all 12 heads); SigLIP (seq 729) slows down with 24 (1860 -> 1949 us), which the budget rules out.
GROUP_ITEMS = 24
# Heads of the (B, H, S, D) layout (q^T and k^T by DMA transpose, every transfer moving a group's heads at once)
# go in smaller groups: a group's transfers all precede its first scores. Measured on trn2 bf16, ViT-B/16 batch 8
# (benchmarks/vit.py --ideas): 223.2 us with 8 tiles per group, 152.0 us with 12, 208.6 us with 24.
GROUP_ITEMS_BY_DMA = 12
GROUP_SBUF_BUDGET = 32 * 1024
ROWS_SBUF_BUDGET = 96 * 1024  # bytes per partition the qkv kernel may spend on a batch element's rows and output

_ENGINES = {"scalar": nisa.scalar_engine, "vector": nisa.vector_engine}
EVICT_ENGINES = tuple(_ENGINES)  # the names ``evict`` takes
# PSUM->SBUF copies, round robin: three of four on the Scalar engine. The measured best on ViT-B/16 batch 8, bf16,
# trn2 (benchmarks/vit.py --ideas: all Vector, all Scalar, alternating, and this): the Vector engine already
# carries the row max and the division, the Scalar engine the exp.
DEFAULT_EVICT = ("scalar", "scalar", "vector", "scalar")
# Longer sequences: a resident strip of more than one PSUM bank puts every copy on the Scalar engine (the Vector
# engine carries the max of every chunk of the strip and binds): measured on trn2 bf16 batch 1
# (benchmarks/vit.py --ideas) SigLIP 213.9 -> 191.9 us, DINOv2 654.1 -> 576.0 us. The flash loop alternates
# (seq 2048 x 16 heads: 1803.9 us with DEFAULT_EVICT, 1858.5 all on Scalar, 1721.6 alternating).
LONG_EVICT = ("scalar",)
FLASH_EVICT = ("scalar", "vector")


def choose_evict(seq: int, strategy: str, evict="auto") -> tuple:
    """The PSUM-copy engines for a sequence length and strategy (see ``DEFAULT_EVICT``, ``LONG_EVICT`` and
    ``FLASH_EVICT``); an explicit tuple of engine names is returned unchanged."""
    if evict != "auto":
        return tuple(evict)
    if strategy == "flash":
        return FLASH_EVICT
    return DEFAULT_EVICT if seq <= BANK else LONG_EVICT


def _static(n):
    """``n`` as an int, or None for a shape family's symbolic dimension (``nki.spec(dims=)``)."""
    try:
        return operator.index(n)
    except nki.InconclusiveDimensionError:
        return None


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def rows_fit(seq: int, heads: int, d: int, itemsize: int) -> bool:
    """Do a batch element's qkv rows and its output rows fit ``ROWS_SBUF_BUDGET`` per partition?"""
    return math.ceil(seq / PMAX) * 4 * heads * d * itemsize <= ROWS_SBUF_BUDGET


class _Evict:
    """PSUM -> SBUF copies, round robin over the chosen engines; ``scale`` multiplies on the way."""

    def __init__(self, names):
        self.engines = tuple(_ENGINES[n] for n in names)
        self.turn = 0

    def __call__(self, src, dtype, mask, scale=None):
        engine = self.engines[self.turn % len(self.engines)]
        self.turn += 1
        if engine == nisa.scalar_engine:  # activation(copy): the Scalar-engine copy every generation has (§2.7)
            return nisa.activation(nl.copy, src, scale=1.0 if scale is None else float(scale), dtype=dtype, mask=mask)
        if scale is None:
            return nisa.tensor_copy(src, dtype=dtype, engine=engine, mask=mask)
        return nisa.tensor_scalar(src, np.multiply, float(scale), dtype=dtype, mask=mask)


class _Group:
    """On-chip buffers of one software-pipelined group of query tiles (the tiles of one or a few heads).

    Every engine runs its instructions in program order, so the stages of different tiles are interleaved in
    program order (``_pipelined``: scores and max of tile n, exp of tile n-1, P^T / P V / division of tile n-2):
    the Tensor engine computes the next scores while the Scalar engine exponentiates. The allocator shares
    SBUF/PSUM between tensors whose program-order live ranges do not overlap, which in straight-line code would
    tie tile n+1's buffers to tile n's through write-after-read waits and undo the pipeline; so the group
    allocates its buffers itself: SBUF tensors with one block per tile (they are small), PSUM as rings
    (``ring``: scores, transposes and accumulators each rotate over their own banks).
    """

    def __init__(self, n_items, seq, d, pe_dtype, out_dtype, evict, resident=True, pair=1):
        self.seq, self.d, self.pe, self.out_dtype, self.evict = seq, d, pe_dtype, out_dtype, evict
        # ``pair`` consecutive tiles (the same query rows of ``pair`` heads) share one accumulator bank and one
        # division: a Vector instruction over [128, pair * d] instead of ``pair`` over [128, d] (each of those
        # pays the static overhead of short instructions, §3.3). Only with single-chunk strips, whose row sums
        # come straight from the exp.
        self.pair = pair if len(_chunks(seq, BANK)) == 1 and pair * d <= BANK else 1
        self.chunks, self.k_tiles = _chunks(seq, BANK), _chunks(seq, PMAX)
        nc, nk = len(self.chunks), len(self.k_tiles)
        self.t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=pe_dtype, buffer=nl.psum)
        self.qT = nl.ndarray((n_items, nl.par_dim(d), PMAX), dtype=pe_dtype)
        if resident:
            # Score strips in flight (3 pipeline stages; 2 for two-bank strips, so the next strip's scores do not
            # wait for this one's exp). PSUM banks: the strips, 2 transposes, the accumulators (both in one bank)
            # and the one result the verifier sees between an instruction and the assign that stores it:
            # ring * nc + 4 <= 8.
            self.ring = {1: 3, 2: 2}.get(nc, 1)
            self.s_ps = nl.ndarray((self.ring * nc, nl.par_dim(PMAX), BANK), dtype=nl.float32, buffer=nl.psum)
            # the two accumulators side by side in one bank (2 * pair * d <= 512 fp32 columns) where they fit
            self.acc_w = self.pair * d
            self.acc = nl.ndarray((nl.par_dim(PMAX), 2 * self.acc_w), dtype=nl.float32, buffer=nl.psum)
            self.p_sb = nl.ndarray((n_items, nl.par_dim(PMAX), seq), dtype=pe_dtype)
            self.pT_sb = nl.ndarray((n_items * nk, nl.par_dim(PMAX), PMAX), dtype=pe_dtype)
            self.neg_max = nl.ndarray((n_items, nl.par_dim(PMAX), nc), dtype=nl.float32)
            self.sums = nl.ndarray((n_items, nl.par_dim(PMAX), nc), dtype=nl.float32)
            self.pair_sums = nl.ndarray((n_items // self.pair, nl.par_dim(PMAX), self.pair), dtype=nl.float32)
            self.reduced = nl.ndarray((2 * n_items, nl.par_dim(PMAX), 1), dtype=nl.float32)
            self.o = nl.ndarray((n_items, nl.par_dim(PMAX), d), dtype=out_dtype)
        self.turn = 0

    def transpose_slot(self):
        """The next PSUM transpose buffer [128, 128] of the ring."""
        self.turn += 1
        return self.turn % 2

    def scores(self, n, qT, kT, rows):
        """Stage A of tile n (Tensor, Vector): the score strip in PSUM (<= 3 banks) and its exact row max."""
        i_p, i_k = nl.arange(PMAX)[:, None], nl.arange(self.d)[:, None]
        nc = len(self.chunks)
        base = (n % self.ring) * nc
        for c, (start, size) in enumerate(self.chunks):
            i_c = nl.arange(size)[None, :]
            self.s_ps[base + c, i_p, i_c] = nisa.nc_matmul(qT, kT(i_k, start + i_c), mask=rows)
            self.neg_max[n, i_p, c] = nisa.tensor_reduce(np.max, self.s_ps[base + c, i_p, i_c], axis=(1,),
                                                         negate=True, mask=rows)  # fmt: skip
        if nc > 1:  # -max of the whole strip = min of the chunks' -max
            self.reduced[2 * n, i_p, 0] = nisa.tensor_reduce(np.min, self.neg_max[n, i_p, nl.arange(nc)[None, :]],
                                                             axis=(1,), mask=rows)  # fmt: skip

    def exponentiate(self, n, rows):
        """Stage B of tile n (Scalar): one fused ``exp(s - max)`` + row-sum pass per chunk, PSUM -> SBUF."""
        i_p = nl.arange(PMAX)[:, None]
        nc = len(self.chunks)
        base = (n % self.ring) * nc
        bias = self.neg_max[n, i_p, nl.arange(1)[None, :]] if nc == 1 else self.reduced[2 * n, i_p,
                                                                                          nl.arange(1)[None, :]]
        for c, (start, size) in enumerate(self.chunks):
            i_c = nl.arange(size)[None, :]
            res = self.sums[n, i_p, c] if self.pair == 1 else self.pair_sums[n // self.pair, i_p, n % self.pair]
            self.p_sb[n, i_p, start + i_c] = nisa.activation(np.exp, self.s_ps[base + c, i_p, i_c], bias=bias,
                                                             reduce_op=np.add, reduce_res=res, mask=rows)  # fmt: skip

    def probabilities_times_v(self, n, v_tile, rows, q_cols_ok, dst=None, pair_dst=None, pair_rows=None):
        """Stage C of tile n: P^T block by block (Tensor-engine transposes, copied to SBUF; all transposes are
        issued before the matmuls so the Tensor engine does not wait on each copy), ``P V`` with P^T stationary
        and the short V tile moving, the first matmul opening the accumulation group (no memset); then the
        delayed division by the row sum, written to ``dst(i_p, i_d)`` (an SBUF access; by default this tile's
        output block), or, for the last tile of a pair, for the whole pair to ``pair_dst(i_p, i_g, i_d)`` under
        ``pair_rows``, the rows mask over the [128, pair, d] indices (``rows`` is over [128, d]: in a 3-D op its
        index would broadcast onto the pair axis, and a 1-row last tile left the pair's second head unwritten).
        Returns what it wrote (None for a tile whose pair is not complete)."""
        i_p, i_d = nl.arange(PMAX)[:, None], nl.arange(self.d)[None, :]
        i_q = nl.arange(PMAX)[None, :]
        nc, nk = len(self.chunks), len(self.k_tiles)
        acc, col = (n // self.pair) % 2, (n % self.pair) * self.d
        for j, (start, size) in enumerate(self.k_tiles):
            i_kp = nl.arange(size)[:, None]
            slot = self.transpose_slot()
            self.t_ps[slot, i_kp, i_q] = nisa.nc_transpose(self.p_sb[n, i_p, start + nl.arange(size)[None, :]],
                                                           mask=q_cols_ok)  # fmt: skip
            self.pT_sb[n * nk + j, i_kp, i_q] = self.evict(self.t_ps[slot, i_kp, i_q], self.pe, q_cols_ok)
        for j, (_, size) in enumerate(self.k_tiles):
            product = nisa.nc_matmul(self.pT_sb[n * nk + j, nl.arange(size)[:, None], i_q], v_tile(j, size),
                                     mask=rows)  # fmt: skip
            if j == 0:
                self.acc[i_p, acc * self.acc_w + col + i_d] = product
            else:
                self.acc[i_p, acc * self.acc_w + col + i_d] += product
        if self.pair > 1:
            if n % self.pair != self.pair - 1:
                return None
            i_p3, i_g3 = nl.arange(PMAX)[:, None, None], nl.arange(self.pair)[None, :, None]
            i_d3, i_one3 = nl.arange(self.d)[None, None, :], nl.arange(1)[None, None, :]
            out = pair_dst(i_p3, i_g3, i_d3)
            out[...] = nisa.tensor_tensor(self.acc[i_p3, acc * self.acc_w + i_g3 * self.d + i_d3],
                                          self.pair_sums[n // self.pair, i_p3, i_g3 + i_one3], np.divide,
                                          dtype=self.out_dtype, mask=pair_rows)  # fmt: skip
            return out
        total = self.sums[n, i_p, nl.arange(1)[None, :]]
        if nc > 1:
            self.reduced[2 * n + 1, i_p, 0] = nisa.tensor_reduce(np.add, self.sums[n, i_p, nl.arange(nc)[None, :]],
                                                                 axis=(1,), mask=rows)  # fmt: skip
            total = self.reduced[2 * n + 1, i_p, nl.arange(1)[None, :]]
        dst = dst or (lambda r, c: self.o[n, r, c])
        dst(i_p, i_d)[...] = nisa.tensor_scalar(self.acc[i_p, acc * self.acc_w + i_d], np.divide, total,
                                                dtype=self.out_dtype, mask=rows)  # fmt: skip
        return dst(i_p, i_d)


def _pipelined(group, items, strategy):
    """Run query tiles ``items`` (dicts: ``qT(n)`` puts q^T on chip and returns it, ``kT(i_k, i_c)``, ``v_tile(j,
    size)``, ``rows``, ``q_cols_ok``, and ``write(o)`` or ``dst(i_p, i_d)``).

    Resident tiles run as a three-stage software pipeline in program order: at step t, scores of tile t (stage
    A), exp of tile t-1 (B) and P V of tile t-2 (C); with one score strip in PSUM (``ring == 1``) B comes first
    so the strip is read before the next one overwrites it. Every q^T is made before the first scores. Flash
    tiles go in interleaved sets (``_flash``)."""
    qTs = [it["qT"](n) for n, it in enumerate(items)]
    if strategy != "resident":
        per = flash_interleave(group.d)
        for n0 in range(0, len(items), per):
            tiles = [dict(it, qT_tile=qTs[n]) for n, it in enumerate(items[n0:n0 + per], n0)]
            for it, o in zip(tiles, _flash(tiles, group.seq, group.d, group.pe, group.out_dtype, group.evict)):
                if "write" in it:
                    it["write"](o)
        return
    n_items = len(items)
    for t in range(n_items + 2):
        stages = [("A", t), ("B", t - 1), ("C", t - 2)]
        if group.ring == 1:
            stages = [("B", t - 1), ("A", t), ("C", t - 2)]
        for stage, n in stages:
            if not 0 <= n < n_items:
                continue
            it = items[n]
            if stage == "A":
                group.scores(n, qTs[n], it["kT"], it["rows"])
            elif stage == "B":
                group.exponentiate(n, it["rows"])
            else:
                o = group.probabilities_times_v(n, it["v_tile"], it["rows"], it["q_cols_ok"], it.get("dst"),
                                                it.get("pair_dst"), it.get("pair_rows"))  # fmt: skip
                if o is not None and "write" in it:
                    it["write"](o)


def heads_per_group(heads: int, q_tiles: int, seq: int, itemsize: int, items: int = GROUP_ITEMS) -> int:
    """Heads pipelined together: the smallest divisor of ``heads`` giving at least ``GROUP_ITEMS`` query tiles,
    fewer where their per-tile SBUF buffers (probability strip, its transposed blocks, q^T) would pass
    ``GROUP_SBUF_BUDGET``. A group's pipeline fills and drains once (the groups are iterations of an affine loop),
    so the larger the group, the less of the kernel runs with idle engines."""
    per_item = itemsize * (seq + (math.ceil(seq / PMAX) + 1) * PMAX)
    want = max(1, min(items, GROUP_SBUF_BUDGET // per_item))
    return next(g for g in range(1, heads + 1) if heads % g == 0 and (g * q_tiles >= want or g == heads))


def flash_interleave(d: int) -> int:
    """Query tiles the flash loop interleaves: FLASH_INTERLEAVE, fewer where their accumulators (d + 1 fp32
    columns each) would not share one PSUM bank."""
    return max(1, min(FLASH_INTERLEAVE, BANK // (d + 1)))


def _flash(tiles, seq, d, pe_dtype, out_dtype, evict):
    """Online softmax over key blocks of FLASH_BLOCK (a ``sequential_range``, the ragged last block traced once
    more with its static size) for ``tiles`` (up to ``flash_interleave(d)`` query tiles, dicts as in
    ``_pipelined`` plus ``qT_tile``). Tiles with a ``dst`` get their normalised output written there; returns the
    output tiles.

    The tiles' blocks are interleaved in program order: each tile's block is a chain of dependent instructions
    over three engines (scores, max, exp, transposes, P V, rescale), and the in-order engines work on one tile's
    chain while the other's waits. Per tile, the running state is ``-max`` (so the new one is ``min`` of the old
    one and the block's ``-max``, straight from the Vector reduce, and the rescaling factor ``exp(m_old - m_new)``
    is one activation of the old state with scale -1; the state copy is on GpSimd) and ``[o | l]``, the output
    and the row sum side by side: the exp writes the block's row sum into the PSUM column after the tile's P V
    accumulator, so one Vector instruction rescales and adds both. PSUM: a score bank per tile, one bank for the
    accumulators, a ring of two transposes."""
    i_p = nl.arange(PMAX)[:, None]
    i_k = nl.arange(d)[:, None]
    i_d, i_e = nl.arange(d)[None, :], nl.arange(d + 1)[None, :]
    i_one = nl.arange(1)[None, :]
    nt, w = len(tiles), d + 1
    neg_m = nl.ndarray((nt, nl.par_dim(PMAX), 1), dtype=nl.float32)  # -(running row max)
    o = nl.ndarray((nt, nl.par_dim(PMAX), w), dtype=nl.float32)  # [o | row sum]
    for u in range(nt):  # on GpSimd, off the Vector engine's queue
        neg_m[u, i_p, i_one] = nisa.memset((PMAX, 1), 3.0e38, nl.float32, engine=nisa.gpsimd_engine)
        o[u, i_p, i_e] = nisa.memset((PMAX, w), 0.0, nl.float32, engine=nisa.gpsimd_engine)
    s_ps = nl.ndarray((nt, nl.par_dim(PMAX), FLASH_BLOCK), dtype=nl.float32, buffer=nl.psum)
    acc = nl.ndarray((nl.par_dim(PMAX), nt * w), dtype=nl.float32, buffer=nl.psum)  # one bank: [P V | sum] each
    t_ps = nl.ndarray((2, nl.par_dim(PMAX), PMAX), dtype=pe_dtype, buffer=nl.psum)
    neg_new = nl.ndarray((nt, nl.par_dim(PMAX), 1), dtype=nl.float32)
    block_neg = nl.ndarray((nt, nl.par_dim(PMAX), 1), dtype=nl.float32)
    alpha = nl.ndarray((nt, nl.par_dim(PMAX), 1), dtype=nl.float32)
    p_sb = nl.ndarray((nt, nl.par_dim(PMAX), FLASH_BLOCK), dtype=pe_dtype)
    pT = nl.ndarray((nt * (FLASH_BLOCK // PMAX), nl.par_dim(PMAX), PMAX), dtype=pe_dtype)
    per_block = FLASH_BLOCK // PMAX

    def scores(u, it, start, size):
        i_c = nl.arange(size)[None, :]
        rows = it["rows"]
        s_ps[u, i_p, i_c] = nisa.nc_matmul(it["qT_tile"], it["kT"](i_k, start + i_c), mask=rows)
        block_neg[u, i_p, i_one] = nisa.tensor_reduce(np.max, s_ps[u, i_p, i_c], axis=(1,), negate=True, keepdims=True,
                                                      mask=rows)  # fmt: skip

    def new_max(u, it):
        neg_new[u, i_p, i_one] = nl.minimum(neg_m[u, i_p, i_one], block_neg[u, i_p, i_one], mask=it["rows"])

    def exponentiate(u, it, size):
        i_c = nl.arange(size)[None, :]
        rows = it["rows"]
        # exp(m_old - m_new) = exp(-1 * (-m_old) + (-m_new))
        alpha[u, i_p, i_one] = nisa.activation(np.exp, neg_m[u, i_p, i_one], scale=-1.0, bias=neg_new[u, i_p, i_one],
                                               mask=rows)  # fmt: skip
        p_sb[u, i_p, i_c] = nisa.activation(np.exp, s_ps[u, i_p, i_c], bias=neg_new[u, i_p, i_one], reduce_op=np.add,
                                            reduce_res=acc[i_p, u * w + d + i_one], mask=rows,
                                            dtype=pe_dtype)  # fmt: skip
        neg_m[u, i_p, i_one] = nisa.tensor_copy(neg_new[u, i_p, i_one], engine=nisa.gpsimd_engine, mask=rows)

    def times_v(u, it, size, first_tile):
        rows, q_cols_ok = it["rows"], it["q_cols_ok"]
        i_q = nl.arange(PMAX)[None, :]
        blocks = _chunks(size, PMAX)
        for j, (s0, sz) in enumerate(blocks):
            i_kp = nl.arange(sz)[:, None]
            slot = (u * per_block + j) % 2
            t_ps[slot, i_kp, i_q] = nisa.nc_transpose(p_sb[u, i_p, s0 + nl.arange(sz)[None, :]], mask=q_cols_ok)
            pT[u * per_block + j, i_kp, i_q] = evict(t_ps[slot, i_kp, i_q], pe_dtype, q_cols_ok)
        for j, (_, sz) in enumerate(blocks):
            product = nisa.nc_matmul(pT[u * per_block + j, nl.arange(sz)[:, None], i_q], it["v_tile"](first_tile + j,
                                     sz), mask=rows)  # fmt: skip
            if j == 0:
                acc[i_p, u * w + i_d] = product
            else:
                acc[i_p, u * w + i_d] += product
        o[u, i_p, i_e] = nisa.scalar_tensor_tensor(data=o[u, i_p, i_e], op0=np.multiply, operand0=alpha[u, i_p, i_one],
                                                   op1=np.add, operand1=acc[i_p, u * w + i_e], mask=rows)  # fmt: skip

    def block(start, size, first_tile):
        for u, it in enumerate(tiles):
            scores(u, it, start, size)
        for u, it in enumerate(tiles):  # after every tile's reduce: not right behind the reduce it reads (§3.3)
            new_max(u, it)
        for u, it in enumerate(tiles):
            exponentiate(u, it, size)
        for u, it in enumerate(tiles):
            times_v(u, it, size, first_tile)

    n_full = seq // FLASH_BLOCK
    for blk in nl.sequential_range(n_full):
        block(blk * FLASH_BLOCK, FLASH_BLOCK, blk * per_block)
    if seq % FLASH_BLOCK:
        block(n_full * FLASH_BLOCK, seq % FLASH_BLOCK, n_full * per_block)
    outs = []
    for u, it in enumerate(tiles):
        res = nisa.tensor_scalar(o[u, i_p, i_d], np.divide, o[u, i_p, d + i_one], dtype=out_dtype, mask=it["rows"])
        if "dst" in it:
            it["dst"](i_p, i_d)[...] = res
        outs.append(res)
    return outs


def _query_tiles(seq):
    """Static (first row, mask over partitions, mask over free columns) of each 128-row query tile."""
    return [(q0, q0 + nl.arange(PMAX)[:, None] < seq, q0 + nl.arange(PMAX)[None, :] < seq)
            for q0, _ in _chunks(seq, PMAX)]  # fmt: skip


def _kT_by_dma(kT, g, rows_of, seq, d, scale):
    """(scale * K)^T [d, seq] of one head into block g of ``kT``: a DMA transpose of its [seq, d] rows, then one
    ScalarE pass that scales."""
    raw = nl.load_transpose2d(rows_of(nl.arange(seq)[:, None], nl.arange(d)[None, :]))
    kT[g, nl.arange(d)[:, None], nl.arange(seq)[None, :]] = nisa.activation(nl.copy, raw, scale=float(scale),
                                                                            dtype=kT.dtype)  # fmt: skip


def _heads_by_dma(hg, group, q_of, k_of, v_of, o_of, seq, d, scale, pe, out_dtype, strategy, evict):
    """One group of heads whose q/k/v rows are read straight from HBM: q^T and k^T by DMA transpose, V by row
    loads (``q_of(h, rows, cols)`` etc. give the HBM accesses); outputs stored per tile."""
    k_tiles, q_tiles = _chunks(seq, PMAX), _query_tiles(seq)
    i_p, i_d, i_dp = nl.arange(PMAX)[:, None], nl.arange(d)[None, :], nl.arange(d)[:, None]
    buf = _Group(group * len(q_tiles), seq, d, pe, out_dtype, _Evict(evict), strategy == "resident")
    kT = nl.ndarray((group, nl.par_dim(d), seq), dtype=pe)
    v_sb = nl.ndarray((group * len(k_tiles), nl.par_dim(PMAX), d), dtype=pe)
    items = []
    for g in range(group):
        h = hg * group + g
        _kT_by_dma(kT, g, lambda r, c, h=h: k_of(h, r, c), seq, d, scale)
        for j, (start, size) in enumerate(k_tiles):  # the ragged last key tile: a smaller load, no padding
            i_k = nl.arange(size)[:, None]
            v_sb[g * len(k_tiles) + j, i_k, i_d] = nl.load(v_of(h, start + i_k, i_d))
        for q0, rows, q_cols_ok in q_tiles:
            def qT(n, h=h, q0=q0, rows=rows):
                buf.qT[n, i_dp, nl.arange(PMAX)[None, :]] = nl.load_transpose2d(q_of(h, q0 + i_p, i_d), mask=rows)
                return buf.qT[n, i_dp, nl.arange(PMAX)[None, :]]

            def write(o, h=h, q0=q0, rows=rows):
                nl.store(o_of(h, q0 + i_p, i_d), value=o, mask=rows)

            items.append(dict(qT=qT, kT=lambda r, c, g=g: kT[g, r, c], rows=rows, q_cols_ok=q_cols_ok, write=write,
                              v_tile=lambda j, size, g=g: v_sb[g * len(k_tiles) + j, nl.arange(size)[:, None], i_d]))
    _pipelined(buf, items, strategy)


def _heads_from_rows(hg, group, rows_sb, out_sb, seq, d, hd, scale, pe, out_dtype, strategy, evict):
    """One group of heads of the qkv layout whose rows are in SBUF (``rows_sb`` [tiles, 128, 3 * heads * d]):
    q^T and k^T by Tensor-engine transposes of the heads' columns, V read in place as the moving operand, the
    outputs written into the heads' columns of ``out_sb``. Heads that fit the partitions together (``share``
    of them, share * d <= 128, e.g. two heads of 64) are transposed at once: head g's q^T and k^T are then
    partitions [g * d, (g + 1) * d) of the shared tiles (the Tensor engine contracts over those rows), and
    they share one division (``_Group.pair``)."""
    tiles, q_tiles = _chunks(seq, PMAX), _query_tiles(seq)
    i_p, i_q = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    i_d = nl.arange(d)[None, :]
    share = max(s for s in range(1, group + 1) if group % s == 0 and s * d <= PMAX)
    parts, width = group // share, share * d  # transposes cover ``width`` columns: ``share`` heads
    i_wp, i_w = nl.arange(width)[:, None], nl.arange(width)[None, :]
    buf = _Group(group * len(q_tiles), seq, d, pe, out_dtype, _Evict(evict), strategy == "resident", pair=share)
    kT = nl.ndarray((parts, nl.par_dim(width), seq), dtype=pe)
    qT = nl.ndarray((parts * len(q_tiles), nl.par_dim(width), PMAX), dtype=pe)
    # (scale * K)^T: transposes of the k columns, scaled in the PSUM copy; q^T likewise, unscaled.
    for part in range(parts):
        col = (hg * parts + part) * width
        for j, (start, size) in enumerate(tiles):
            i_c = nl.arange(size)[None, :]
            slot = buf.transpose_slot()
            buf.t_ps[slot, i_wp, i_c] = nisa.nc_transpose(rows_sb[j, nl.arange(size)[:, None], hd + col + i_w])
            kT[part, i_wp, start + i_c] = buf.evict(buf.t_ps[slot, i_wp, i_c], pe, None, scale=scale)
        for t, (_, _, q_cols_ok) in enumerate(q_tiles):
            slot = buf.transpose_slot()
            buf.t_ps[slot, i_wp, i_q] = nisa.nc_transpose(rows_sb[t, i_p, col + i_w], mask=q_cols_ok)
            qT[part * len(q_tiles) + t, i_wp, i_q] = buf.evict(buf.t_ps[slot, i_wp, i_q], pe, q_cols_ok)
    items = []
    for part in range(parts):
        h0 = hg * group + part * share
        for t, (q0, rows, q_cols_ok) in enumerate(q_tiles):  # tile-major within a part: a pair is consecutive
            for g in range(share):
                h = h0 + g
                i_k = g * d + nl.arange(d)[:, None]
                items.append(dict(
                    qT=lambda n, part=part, t=t, i_k=i_k: qT[part * len(q_tiles) + t, i_k, i_q],
                    kT=lambda r, c, part=part, g=g: kT[part, g * d + r, c], rows=rows, q_cols_ok=q_cols_ok,
                    pair_rows=q0 + nl.arange(PMAX)[:, None, None] < seq,
                    dst=lambda r, c, t=t, h=h: out_sb[t, r, h * d + c],
                    pair_dst=lambda r, g3, c, t=t, h0=h0: out_sb[t, r, h0 * d + g3 * d + c],
                    v_tile=lambda j, size, h=h: rows_sb[j, nl.arange(size)[:, None], 2 * hd + h * d + i_d]))
    _pipelined(buf, items, strategy)


def _bhsd_group(q, k, v, out, b, hg, group, seq, d, scale, strategy, evict):
    """One group of heads of the (B, H, S, D) layout, every transfer moving all the group's heads at once (3-D
    accesses [rows, heads, head_dim]; a head's rows are head_dim long, so one transfer per head would pay the ~1.3
    us fixed cost for a few hundred bytes per partition, reference/nki.md §3.4): (scale * K)^T by one 3-D DMA
    transpose and one ScalarE pass, V by one DMA per 128-key tile, q^T by one DMA transpose per query tile, and
    each query tile's outputs (assembled in SBUF) out in one DMA."""
    k_tiles, q_tiles = _chunks(seq, PMAX), _query_tiles(seq)
    pe = q.dtype
    h0 = hg * group
    i_d = nl.arange(d)[None, :]
    i_s3, i_g3, i_d3 = nl.arange(seq)[:, None, None], nl.arange(group)[None, :, None], nl.arange(d)[None, None, :]
    i_p3, i_q3 = nl.arange(PMAX)[:, None, None], nl.arange(PMAX)[None, None, :]
    buf = _Group(group * len(q_tiles), seq, d, pe, pe, _Evict(evict), strategy == "resident")
    raw = nisa.dma_transpose(k[b, h0 + i_g3, i_s3, i_d3], axes=(2, 1, 0))  # [d, group, seq]
    kT = nl.ndarray((nl.par_dim(d), group * seq), dtype=pe)
    i_dk3, i_c3 = nl.arange(d)[:, None, None], nl.arange(seq)[None, None, :]
    kT[i_dk3, i_g3 * seq + i_c3] = nisa.activation(nl.copy, raw[i_dk3, i_g3, i_c3], scale=float(scale), dtype=pe)
    v_sb = nl.ndarray((len(k_tiles), nl.par_dim(PMAX), group * d), dtype=pe)
    for j, (start, size) in enumerate(k_tiles):  # the ragged last key tile: a smaller load, no padding
        i_k3 = nl.arange(size)[:, None, None]
        nisa.dma_copy(dst=v_sb[j, i_k3, i_g3 * d + i_d3], src=v[b, h0 + i_g3, start + i_k3, i_d3])
    qT = [nisa.dma_transpose(q[b, h0 + i_g3, q0 + i_p3, i_d3], axes=(2, 1, 0), mask=q0 + i_q3 < seq)
          for q0, _, _ in q_tiles]  # [d, group, 128] per query tile  # fmt: skip
    o_sb = nl.ndarray((len(q_tiles), nl.par_dim(PMAX), group * d), dtype=pe)
    items = []
    for g in range(group):
        for t, (_, rows, q_cols_ok) in enumerate(q_tiles):
            items.append(dict(qT=lambda n, t=t, g=g: qT[t][nl.arange(d)[:, None], g, nl.arange(PMAX)[None, :]],
                              kT=lambda r, c, g=g: kT[r, g * seq + c], rows=rows, q_cols_ok=q_cols_ok,
                              dst=lambda r, c, t=t, g=g: o_sb[t, r, g * d + c],
                              v_tile=lambda j, size, g=g: v_sb[j, nl.arange(size)[:, None], g * d + i_d]))
    _pipelined(buf, items, strategy)
    for t, (q0, _, _) in enumerate(q_tiles):
        r3 = q0 + i_p3
        nl.store(out[b, h0 + i_g3, r3, i_d3], value=o_sb[t, i_p3, i_g3 * d + i_d3], mask=r3 < seq)


def _qkv_slices_group(qkv, out, b, hg, group, seq, d, hd, scale, strategy, evict):
    _heads_by_dma(hg, group, lambda h, r, c: qkv[b, r, h * d + c], lambda h, r, c: qkv[b, r, hd + h * d + c],
                  lambda h, r, c: qkv[b, r, 2 * hd + h * d + c], lambda h, r, c: out[b, r, h * d + c], seq, d,
                  scale, qkv.dtype, qkv.dtype, strategy, evict)  # fmt: skip


@nki.jit
def attention_kernel(q, k, v, scale=0.125, strategy="resident", evict=DEFAULT_EVICT):
    batch, heads, seq, d = q.shape
    out = nl.ndarray((batch, heads, seq, d), dtype=q.dtype, buffer=nl.shared_hbm)
    if _static(seq) is None:  # a shape family over the sequence length: one schedule for every S (seq_family.py)
        from .seq_family import attention_any_seq

        attention_any_seq(q, k, v, out, scale, strategy)
        return out
    group = heads_per_group(heads, len(_query_tiles(seq)), seq, np.dtype(q.dtype).itemsize, GROUP_ITEMS_BY_DMA)
    for b in nl.affine_range(batch):
        for hg in nl.affine_range(heads // group):
            _bhsd_group(q, k, v, out, b, hg, group, seq, d, scale, strategy, evict)
    return out


@nki.jit
def attention_qkv_kernel(qkv, num_heads=1, scale=0.125, strategy="resident", evict=DEFAULT_EVICT):
    batch, seq, width = qkv.shape
    d = width // (3 * num_heads)
    hd = num_heads * d
    out = nl.ndarray((batch, seq, hd), dtype=qkv.dtype, buffer=nl.shared_hbm)
    if _static(seq) is None or _static(width) is None:  # a family over S or the head dim (seq_family.py)
        from .seq_family import attention_qkv_any_seq

        attention_qkv_any_seq(qkv, out, num_heads, scale)
        return out
    q_tiles = _query_tiles(seq)
    group = heads_per_group(num_heads, len(q_tiles), seq, np.dtype(qkv.dtype).itemsize)
    if not rows_fit(seq, num_heads, d, np.dtype(qkv.dtype).itemsize):
        group = heads_per_group(num_heads, len(q_tiles), seq, np.dtype(qkv.dtype).itemsize, GROUP_ITEMS_BY_DMA)
        for b in nl.affine_range(batch):  # per-head slices: strided rows of head_dim columns
            for hg in nl.affine_range(num_heads // group):
                _qkv_slices_group(qkv, out, b, hg, group, seq, d, hd, scale, strategy, evict)
        return out

    i_p, i_w, i_hd = nl.arange(PMAX)[:, None], nl.arange(width)[None, :], nl.arange(hd)[None, :]
    for b in nl.affine_range(batch):
        # All rows of this batch element: [128 rows, 3 * heads * d] per tile, one full-width DMA each.
        rows_sb = nl.ndarray((len(q_tiles), nl.par_dim(PMAX), width), dtype=qkv.dtype)
        for t, (q0, rows, _) in enumerate(q_tiles):
            nisa.dma_copy(dst=rows_sb[t, i_p, i_w], src=qkv[b, q0 + i_p, i_w], mask=rows)
        out_sb = nl.ndarray((len(q_tiles), nl.par_dim(PMAX), hd), dtype=qkv.dtype)
        for hg in nl.affine_range(num_heads // group):
            _heads_from_rows(hg, group, rows_sb, out_sb, seq, d, hd, scale, qkv.dtype, qkv.dtype, strategy, evict)
        for t, (q0, rows, _) in enumerate(q_tiles):
            nl.store(out[b, q0 + i_p, i_hd], value=out_sb[t, i_p, i_hd], mask=rows)
    return out
