"""LayerNorm for a shape family whose row length W is a symbol (``nki.spec(dims=)``), with epsilon a runtime scalar
(the kernel's last parameter, a one-element float32 array: any epsilon runs the same IR), as
``launcher.plan_layernorm`` dispatches it: the numbers of ``kernel.layernorm_kernel``'s concrete trace at every
instance, bit for bit (tests/kernels/test_norm_width_families.py).

The concrete kernel sizes its tiles by the row length and unrolls one ``bn_stats`` per 512 columns in Python; neither
can be traced with W symbolic. So a width family runs the concrete kernel's instructions on tiles sized for the top
of its range (``top``), masked to the rows below N and the columns below W:

* ``bn_stats`` per 512 columns is a loop of ``ceil(W / 512)``, the last chunk masked to the columns below W (a
  masked ``bn_stats`` reads the kept box, as the concrete trace's narrower last chunk);
* ``bn_aggr`` reads every chunk's slots of the top of the range, those past the last chunk zeroed first (a group of
  no elements adds nothing: the same mean and variance as the concrete trace's);
* the rest (rsqrt with epsilon as the bias, the normalisation as one Scalar ``activation``, gamma and beta on GpSimd)
  as in ``kernel._group``, epsilon loaded from its array onto every partition.

The families of a dtype split the widths up to the launcher's limit into ranges that double (1..2048, 2049..4096,
...: ``width_boxes``): a tile is sized for the top of its range, and the smaller the tiles the more row tiles SBUF
holds in flight. Modelled at 4096 x 1280 bf16: 116.3 us in a 1..8192 family, 93.7 in 1..2048, 95.0 for the
concrete trace (whose gamma and beta take a load and a broadcast each, where this kernel spreads them over the
partitions with one DMA each).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import BN_STATS_FMAX, PMAX

FIRST_TOP = 2048  # the first family's widest row (ViT-B..H's 768..1280 in it)


def width_boxes(dtype: str, max_columns: int) -> list[tuple[int, int]]:
    """The W ranges of a dtype's families: 1..2048, then ranges doubling up to ``max_columns``. Each top fits SBUF
    (x, the normalised, scaled and shifted rows and gamma's and beta's broadcasts, [128, W] each: 16384 columns of a
    2-byte dtype are 192 KiB, ``launcher.max_columns``)."""
    boxes, lo, hi = [], 1, min(FIRST_TOP, max_columns)
    while lo <= max_columns:
        boxes.append((lo, hi))
        lo, hi = hi + 1, min(2 * hi, max_columns)
    return boxes


def top(n) -> int:
    """The largest value of a dimension over the family (an int is its own)."""
    return n if isinstance(n, int) else n.table.bounds(n.expr)[1]


def _spread(row, i_f, mask, width):
    """A [1, F] HBM row on every partition, [128, F]: one DMA reading it 128 times (the masked columns only; a
    load then ``broadcast_to`` copies the whole on-chip row, the top of the range, whatever W is)."""
    i_p = nl.arange(PMAX)[:, None]
    tile = nl.ndarray((nl.par_dim(PMAX), width), dtype=row.dtype)
    nisa.dma_copy(dst=tile[i_p, i_f], src=row[0 * i_p, i_f], mask=mask)
    return tile


@nki.jit
def layernorm_widths(x, gamma, beta, epsilon):
    rows, n = x.shape
    width = top(n)
    out = nl.ndarray((rows, n), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    cols = i_f < n
    g, bt = (_spread(v.reshape((1, n)), i_f, cols, width) for v in (gamma, beta))
    eps = _spread(epsilon.reshape((1, 1)), nl.arange(1)[None, :], None, 1)
    slots = 6 * math.ceil(width / BN_STATS_FMAX)  # bn_stats' six per 512-column chunk, for the top of the range
    i_s, i_six, i_c = nl.arange(slots)[None, :], nl.arange(6)[None, :], nl.arange(BN_STATS_FMAX)[None, :]
    for t in nl.affine_range(math.ceil(rows / PMAX)):
        r = t * PMAX + i_p
        ok = r < rows
        tile = nl.load(x[r, i_f], mask=ok & cols)
        stats = nl.ndarray((nl.par_dim(PMAX), slots), dtype=nl.float32)
        stats[i_p, i_s] = nisa.memset((PMAX, slots), 0, nl.float32)
        for c in nl.affine_range(math.ceil(n / BN_STATS_FMAX)):
            chunk = c * BN_STATS_FMAX + i_c
            stats[i_p, 6 * c + i_six] = nisa.bn_stats(tile[i_p, chunk], mask=ok & (chunk < n), dtype=nl.float32)
        mv = nisa.bn_aggr(stats, mask=ok)  # [128, 2]: mean, variance
        rstd = nisa.activation(nl.rsqrt, mv[i_p, 1], bias=eps, mask=ok)
        neg_mean = nisa.activation(nl.copy, mv[i_p, 0], scale=-1.0, mask=ok)
        nmr = nisa.activation(nl.copy, neg_mean, scale=rstd, mask=ok)
        z = nisa.activation(nl.copy, tile, scale=rstd, bias=nmr, mask=ok & cols, dtype=x.dtype)
        y = nisa.tensor_tensor(z, g, np.multiply, mask=ok & cols, dtype=x.dtype, engine=nisa.gpsimd_engine)
        o = nisa.tensor_tensor(y, bt, np.add, mask=ok & cols, dtype=x.dtype, engine=nisa.gpsimd_engine)
        nl.store(out[r, i_f], value=o, mask=ok & cols)
    return out
