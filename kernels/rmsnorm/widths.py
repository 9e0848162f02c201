"""RMSNorm for a shape family whose row length W is a symbol (``nki.spec(dims=)``), with epsilon a runtime scalar
(the kernel's last parameter, a one-element float32 array: any epsilon runs the same IR), as
``launcher.plan_rmsnorm`` dispatches it: the numbers of ``kernel.rmsnorm_kernel``'s concrete trace at every instance,
bit for bit (tests/kernels/test_norm_width_families.py).

The concrete kernel sizes its tiles by the row length and divides the sum of squares by it in Python (``nl.rms_norm``
multiplies by ``1.0 / n``); neither can be traced with W symbolic. So a width family runs ``nl.rms_norm``'s
instructions on tiles sized for the top of its range (``top``), masked to the rows below N and the columns below W
(the sum of squares reduces only the columns the mask keeps), and makes ``1 / W`` on chip: a masked sum of ones
counts the W columns exactly in float32 and ``nl.reciprocal`` rounds ``1 / W`` once, as the concrete trace's fp32
multiply by the Python float does. The families of a dtype split the widths up to ``launcher.MAX_COLUMNS`` where two row
tiles' tensors stop fitting a partition's SBUF (``width_boxes``), so that below that width one tile's load overlaps
the previous tile's compute, as the concrete trace's does (above it neither double-buffers).
"""

import math

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

SBUF_PARTITION_BYTES = 224 * 1024  # a trn2 partition's SBUF (reference/nki.md §1.2 table), the Hub's target


def width_boxes(dtype: str, max_columns: int) -> list[tuple[int, int]]:
    """The W ranges of a dtype's families: up to the largest power of two whose row tile's tensors ([128, W] each:
    x and the result in the dtype, the fp32 squares and x * rstd) fit SBUF twice, then the rest."""
    per_column = 2 * np.dtype(nl.bfloat16 if dtype == "bfloat16" else dtype).itemsize + 2 * 4
    double = 1 << int(math.log2(SBUF_PARTITION_BYTES // (2 * per_column)))
    return [(1, max_columns)] if double >= max_columns else [(1, double), (double + 1, max_columns)]


def top(n) -> int:
    """The largest value of a dimension over the family (an int is its own)."""
    return n if isinstance(n, int) else n.table.bounds(n.expr)[1]


def runtime_epsilon(epsilon):
    """The runtime epsilon ([1] float32 in HBM) as a [1, 1] float32 tile (operands broadcast it across partitions)."""
    return nl.load(epsilon.reshape((1, 1)))


def reciprocal_count(n):
    """``fp32(1 / n)`` on every partition ([128, 1] float32) for a symbolic ``n`` up to 128 * 128: a [128, 128] tile
    of ones masked to the first ``n`` elements in row-major order (partition p holds ``min(128, n - 128 p)`` of
    them) summed along the free axis, then across the partitions by a matmul with a ones matrix (integers: exact in
    fp32), then ``nl.reciprocal``. About 1 us however large ``n`` is, where a masked sum over one [128, n] row of
    ones costs two Vector instructions of ``n`` elements."""
    pmax, cd = nl.tile_size.pmax, nl.float32
    if top(n) > pmax * pmax:
        raise ValueError(f"reciprocal_count: at most {pmax * pmax} elements, the range reaches {top(n)}")
    i_p, i_q = nl.arange(pmax)[:, None], nl.arange(pmax)[None, :]
    ones = nisa.memset((pmax, pmax), 1.0, cd)
    kept = nisa.memset((pmax, pmax), 0.0, cd)
    kept[i_p, i_q] = nisa.memset((pmax, pmax), 1.0, cd, mask=pmax * i_p + i_q < n)
    per_partition = nl.sum(kept, axis=[1], keepdims=True, dtype=cd)
    total = nl.ndarray((nl.par_dim(pmax), 1), dtype=cd, buffer=nl.psum)
    total[...] = nisa.nc_matmul(ones, per_partition)  # every partition: the sum over the partitions
    return nl.reciprocal(nl.copy(total, dtype=cd), dtype=cd)


@nki.jit
def rmsnorm_widths(x, g, epsilon):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    num_rows, n = x.shape
    pmax, cd = nl.tile_size.pmax, nl.float32
    i_p, i_f = nl.arange(pmax)[:, None], nl.arange(top(n))[None, :]
    cols = i_f < n
    g_tile = nl.load(g.reshape((1, n))[0, i_f], mask=cols)
    eps = runtime_epsilon(epsilon)
    inv_n = reciprocal_count(n)
    for t in nl.affine_range(math.ceil(num_rows / pmax)):
        rows = t * pmax + i_p
        ok = (rows < num_rows) & cols
        tile = nl.load(x[rows, i_f], mask=ok)
        sq_sum = nl.sum(nl.square(tile, dtype=cd, mask=ok), axis=[1], keepdims=True, dtype=cd, mask=ok)
        mean = nl.multiply(sq_sum, inv_n, dtype=cd, mask=rows < num_rows)
        rstd = nl.rsqrt(nl.add(mean, eps, dtype=cd, mask=rows < num_rows), dtype=cd, mask=rows < num_rows)
        y = nl.multiply(nl.multiply(tile, rstd, dtype=cd, mask=ok), g_tile, dtype=x.dtype, mask=ok)
        nl.store(out[rows, i_f], value=y, mask=ok)
    return out
