"""Attention over a symbolic sequence length of at most one PSUM bank of keys (kernel.toml's S in 1..512 families):
the resident score strip, as the concrete kernel runs it (``kernel._Group``), in place of ``seq_family``'s flash.

With S <= 512 a 128-row query tile's fp32 scores fit one PSUM bank, so there is nothing to stream: the exact row max
comes from the strip in PSUM (a ``reduce_mask`` leaves the keys past S out), one Scalar-engine ``exp(s - max)``
writes the probabilities with their row sum fused (under the same mask), and no running max, rescaling or second
pass over the scores is needed. The heads go ``GROUP`` at a time (an affine loop over ``ceil(H / GROUP)`` groups,
the heads past H masked off: a masked-off instruction is skipped, reference/nki.md §1.3):

* every transfer moves the whole group (§3.4: each transfer pays the ~1.3 us fixed cost; one head's q^T is a few
  hundred bytes per partition): q^T and k^T by one DMA transpose each ([128, GROUP, 512]), V by one load
  ([128 keys, 4 key tiles, GROUP, 128]), each query tile's outputs by one store ([128 rows, GROUP, 128]);
* the group's (head, query tile) items run as the concrete kernel's three-stage software pipeline in program order
  (scores and max of item n, exp of n - 1, P^T and P V of n - 2: ``_pipeline``), so the in-order engines work on
  one head while another waits, where one head per loop iteration ran its chain alone.

Only what the matmuls contract over must be finite (uninitialised memory may hold NaN, and 0 * NaN is NaN): the
head-dim rows past D of q^T and k^T, over the S tokens present (the columns past S only feed scores and outputs the
masks drop); V's rows past S, and the probabilities of the keys past S in the last partial 128-key tile.
"""

from __future__ import annotations

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .seq_family import BLOCK, DMAX, PMAX

# Heads per group. Modelled on trn2 bf16 (benchmarks/family_instances.py --attention), B x H x S x D 1x12x197x64 /
# 8x12x197x64 / 1x16x300x64 (us): 2 heads 41.3 / 314.3 / 85.0, 4 heads 33.9 / 252.7 / 67.0, 8 heads 29.4 / 207.6 /
# 61.9, 16 heads 33.3 / 199.2 / 68.6 (12 heads of 16 leave a third of the group's pipeline steps empty). A group's
# q^T, k^T, (scale * k)^T and V take 4 x 16 KiB per partition in fp32 (of 192 KiB, reference/nki.md §1.1).
GROUP = 8
TILES = BLOCK // PMAX  # query tiles and 128-key tiles of a strip
RING = 3  # score strips in flight in PSUM (the pipeline's three stages; concrete kernel's _Group.ring)


def fits(seq) -> bool:
    """Does every S of the family fit one strip? (False where the declared range does not decide it.)"""
    try:
        return bool(seq <= BLOCK)
    except nki.InconclusiveDimensionError:
        return False


def schedule(seq, strategy: str = "auto") -> str:
    """The schedule of a trace over a symbolic S for ``strategy``: "auto" the strip where it ``fits``, else flash;
    "flash" flash; "resident" the strip, refused (ValueError) where some S of the family does not fit it."""
    if strategy == "resident" and not fits(seq):
        raise ValueError(f"vit-attn: a shape family over the sequence length up to more than {BLOCK} keys runs the "
                         f"flash schedule (seq_family.py), not the resident strip: trace it with strategy 'auto' or "
                         f"'flash'")  # fmt: skip
    return "resident" if strategy != "flash" and fits(seq) else "flash"


def _below(value, bound):
    """``value < bound`` for loop indices and dimensions alone (``h < H``) as a mask: a mask names an index, and
    ``0 * i`` keeps one without changing the condition."""
    return value + 0 * nl.arange(1)[:, None] < bound


def group_size(heads) -> int:
    """Heads per group: ``GROUP``, or fewer where no H of the family passes it (halving until some H does), so that
    the loop over groups keeps a trip count over H (``ceil(H / group)``, not the constant 1), which is what proves
    the kernel independent along H for a loader running more heads in parts (``hub_client/chunks.py``)."""
    group = GROUP
    while group > 1:
        try:
            if not heads <= group:  # (a concrete head count above it, or a range entirely above)
                return group
        except nki.InconclusiveDimensionError:  # some H of the family above it: this size keeps the loop
            return group
        group //= 2
    return 1


def by_transpose(of, seq, d, heads):
    """``load(b, h0, group)``: heads ``h0 .. h0 + group - 1`` as one [128, group, 512] tile (head-dim rows; per head
    its tokens as columns) from row-major HBM rows ``of(b, h, rows, cols)``, by one DMA transpose; the tokens past S,
    the head-dim rows past D and the heads past H masked."""

    def load(b, h0, group):
        i_s, i_g, i_d = nl.arange(BLOCK)[:, None, None], nl.arange(group)[None, :, None], nl.arange(DMAX)[None, None, :]
        o_d, o_g, o_s = nl.arange(DMAX)[:, None, None], nl.arange(group)[None, :, None], nl.arange(BLOCK)[None, None, :]
        return nisa.dma_transpose(of(b, h0 + i_g, i_s, i_d), axes=(2, 1, 0),
                                  mask=(o_d < d) & (h0 + o_g < heads) & (o_s < seq))  # fmt: skip

    return load


def by_rows(of, seq, d, heads):
    """The same tile from a layout that holds it transposed already (``of(b, h, features, tokens)``): one load."""

    def load(b, h0, group):
        o_d, o_g, o_s = nl.arange(DMAX)[:, None, None], nl.arange(group)[None, :, None], nl.arange(BLOCK)[None, None, :]
        return nl.load(of(b, h0 + o_g, o_d, o_s), mask=(o_d < d) & (h0 + o_g < heads) & (o_s < seq))

    return load


def _scale_at(scale, rows):
    """``scale`` as activation takes it: a number as itself, a [128, 1] column read at ``rows``."""
    return scale if isinstance(scale, float | int) else scale[rows, 0]


def strip_heads(batch, heads, seq, d, pe, scale, q_T, k_T, v_of, o_of):
    """Per batch element and group of heads: q^T, k^T (``q_T(b, h0, group)``, ``k_T``: ``by_transpose`` or
    ``by_rows``) and V (``v_of(b, h, rows, cols)``, an HBM access) in one transfer each, then every (head, query
    tile) of the group through the pipeline, each query tile's outputs stored by one transfer to ``o_of(b, h, rows,
    cols)``. ``scale`` a number or a [128, 1] fp32 column (``seq_family.scale_column``)."""
    group = group_size(heads)
    o_d, o_g, o_s = nl.arange(DMAX)[:, None, None], nl.arange(group)[None, :, None], nl.arange(BLOCK)[None, None, :]
    i_k4, i_j4 = nl.arange(PMAX)[:, None, None, None], nl.arange(TILES)[None, :, None, None]
    i_g4, i_d4 = nl.arange(group)[None, None, :, None], nl.arange(DMAX)[None, None, None, :]
    i_p3, i_g3, i_d3 = nl.arange(PMAX)[:, None, None], nl.arange(group)[None, :, None], nl.arange(DMAX)[None, None, :]
    i_dp, i_c = nl.arange(DMAX)[:, None], nl.arange(BLOCK)[None, :]
    unit = isinstance(scale, float | int) and scale == 1  # (the split layout: the scale is already in k)
    for b in nl.affine_range(batch):
        for hg in nl.affine_range((heads + group - 1) // group):
            h0 = hg * group
            present = (h0 + o_g < heads) & (o_s < seq)  # the group's heads and tokens
            qT = nl.ndarray((nl.par_dim(DMAX), group * BLOCK), dtype=pe)
            qT[o_d, o_g * BLOCK + o_s] = nisa.memset((DMAX, group, BLOCK), 0, pe, mask=(o_d >= d) & present,
                                                     engine=nisa.gpsimd_engine)  # fmt: skip
            qT[o_d, o_g * BLOCK + o_s] = q_T(b, h0, group)
            raw = nl.ndarray((nl.par_dim(DMAX), group * BLOCK), dtype=pe)
            raw[o_d, o_g * BLOCK + o_s] = nisa.memset((DMAX, group, BLOCK), 0, pe, mask=(o_d >= d) & present,
                                                      engine=nisa.gpsimd_engine)  # fmt: skip
            raw[o_d, o_g * BLOCK + o_s] = k_T(b, h0, group)
            # (scale * K)^T, a Scalar-engine pass per head over the tokens present only
            kT = raw
            if not unit:
                kT = nl.ndarray((nl.par_dim(DMAX), group * BLOCK), dtype=pe)
                for g in range(group):
                    kT[i_dp, g * BLOCK + i_c] = nisa.activation(nl.copy, raw[i_dp, g * BLOCK + i_c],
                                                                scale=_scale_at(scale, i_dp), dtype=pe,
                                                                mask=(i_c < seq) & _below(h0 + g, heads))  # fmt: skip
            # V: [128 keys, key tile, head, head dim], its rows past S zero
            v_sb = nl.ndarray((nl.par_dim(PMAX), TILES * group * DMAX), dtype=pe)
            keys, v_heads = i_j4 * PMAX + i_k4, h0 + i_g4 < heads
            at = (i_j4 * group + i_g4) * DMAX + i_d4
            v_sb[i_k4, at] = nisa.memset((PMAX, TILES, group, DMAX), 0, pe, mask=(keys >= seq) & v_heads & (i_d4 < d),
                                         engine=nisa.gpsimd_engine)  # fmt: skip
            v_sb[i_k4, at] = nl.load(v_of(b, h0 + i_g4, keys, i_d4), mask=(keys < seq) & v_heads & (i_d4 < d))
            o_sb = nl.ndarray((TILES, nl.par_dim(PMAX), group * DMAX), dtype=pe)
            _pipeline(h0, group, heads, seq, d, pe, qT, kT, v_sb, o_sb)
            for t in range(TILES):
                r3 = t * PMAX + i_p3
                nl.store(o_of(b, h0 + i_g3, r3, i_d3), value=o_sb[t, i_p3, i_g3 * DMAX + i_d3],
                         mask=(r3 < seq) & (h0 + i_g3 < heads) & (i_d3 < d))  # fmt: skip


def _pipeline(h0, group, heads, seq, d, pe, qT, kT, v_sb, o_sb):
    """The group's (query tile, head) items, tile-major, as a three-stage software pipeline in program order: at
    step n the scores and row max of item n (A), the exp of item n - 1 (B), P^T and P V of item n - 2 (C). An item
    past S or past H is masked off whole."""
    i_p, i_c, i_one = nl.arange(PMAX)[:, None], nl.arange(BLOCK)[None, :], nl.arange(1)[None, :]
    i_dp, i_q, i_d = nl.arange(DMAX)[:, None], nl.arange(PMAX)[None, :], nl.arange(DMAX)[None, :]
    i_p3, i_j3, i_q3 = nl.arange(PMAX)[:, None, None], nl.arange(TILES)[None, :, None], nl.arange(PMAX)[None, None, :]
    items = [(t, g) for t in range(TILES) for g in range(group)]
    n_items = len(items)
    s_ps = nl.ndarray((RING, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
    t_ps = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=pe, buffer=nl.psum)
    acc = nl.ndarray((nl.par_dim(PMAX), 2 * DMAX), dtype=nl.float32, buffer=nl.psum)
    p_sb = nl.ndarray((RING + 1, nl.par_dim(PMAX), BLOCK), dtype=pe)
    pT = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=pe)
    neg_max = nl.ndarray((n_items, nl.par_dim(PMAX), 1), dtype=nl.float32)
    sums = nl.ndarray((n_items, nl.par_dim(PMAX), 1), dtype=nl.float32)

    def on(n):  # item n is there: its query tile starts before S, its head is one of the H
        t, g = items[n]
        return _below(t * PMAX, seq) & _below(h0 + g, heads)

    def ok(n):  # over [query rows, ...]: item n's rows before S
        return (items[n][0] * PMAX + i_p < seq) & on(n)

    def key_tile(j):  # the 128-key tile j holds a key before S
        return _below(j * PMAX, seq)

    def scores(n):
        t, g = items[n]
        s_ps[n % RING, i_p, i_c] = nisa.nc_matmul(qT[i_dp, g * BLOCK + t * PMAX + i_q], kT[i_dp, g * BLOCK + i_c],
                                                  mask=ok(n))  # fmt: skip
        neg_max[n, i_p, i_one] = nisa.tensor_reduce(np.max, s_ps[n % RING, i_p, i_c], axis=(1,), negate=True,
                                                    keepdims=True, mask=ok(n) & (i_c < seq))  # fmt: skip

    def exponentiate(n):
        # the keys past S of the last partial key tile: zero, so P^T's rows past S are (P V contracts over them)
        tail = (i_c >= seq) & (i_c < (seq + PMAX - 1) // PMAX * PMAX)
        p_sb[n % (RING + 1), i_p, i_c] = nisa.memset((PMAX, BLOCK), 0, pe, engine=nisa.gpsimd_engine,
                                                     mask=ok(n) & tail)  # fmt: skip
        p_sb[n % (RING + 1), i_p, i_c] = nisa.activation(np.exp, s_ps[n % RING, i_p, i_c],
                                                         bias=neg_max[n, i_p, i_one], reduce_op=np.add,
                                                         reduce_res=sums[n, i_p, i_one], mask=ok(n) & (i_c < seq),
                                                         dtype=pe)  # fmt: skip

    def times_v(n):
        t, g = items[n]
        slot = n % 2
        p = n % (RING + 1)
        for j in range(TILES):  # the key tiles holding a key < S
            t_ps[slot, i_p, j * PMAX + i_q] = nisa.nc_transpose(p_sb[p, i_p, j * PMAX + i_q], mask=on(n) & key_tile(j))
        present = (i_j3 * PMAX < seq) & on(n) & (t * PMAX + i_q3 < seq)
        pT[slot, i_p3, i_j3 * PMAX + i_q3] = nisa.activation(nl.copy, t_ps[slot, i_p3, i_j3 * PMAX + i_q3], dtype=pe,
                                                             mask=present)  # fmt: skip
        for j in range(TILES):
            product = nisa.nc_matmul(pT[slot, i_p, j * PMAX + i_q], v_sb[i_p, (j * group + g) * DMAX + i_d],
                                     mask=ok(n) & key_tile(j))  # fmt: skip
            if j == 0:
                acc[i_p, slot * DMAX + i_d] = product
            else:
                acc[i_p, slot * DMAX + i_d] += product
        o_sb[t, i_p, g * DMAX + i_d] = nisa.tensor_scalar(acc[i_p, slot * DMAX + i_d], np.divide, sums[n, i_p, i_one],
                                                          dtype=pe, mask=ok(n) & (i_d < d))  # fmt: skip

    for step in range(n_items + 2):
        for stage, n in ((scores, step), (exponentiate, step - 1), (times_v, step - 2)):
            if 0 <= n < n_items:
                stage(n)
