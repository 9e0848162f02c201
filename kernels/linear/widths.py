"""The linear kernel for a shape family whose widths K (x's features) or N (the output's) are symbols
(``nki.spec(dims=)``), as ``kernel._linear`` dispatches it: ``x @ w`` with the same epilogues, computing the
concrete trace's numbers bit for bit at every instance (tests/kernels/test_linear_width_families.py).

The concrete kernel decides a great deal on K and N in Python (K tiles unrolled, the weight's load chunks and
runs, whole-row result buffers, the x^T source, a static ragged last tile). None of it can be traced with K or N
symbolic (an on-chip shape or a Python list needs a concrete length), so a width family runs one plain schedule:

* on-chip tensors are sized for the top of the family's ranges (``top``): the weight [K tiles, 128, N blocks *
  512] in SBUF (a family's ranges are split where that stops fitting SBUF: ``kernel.toml``, ``width_boxes``);
* the K tiles are an affine loop of ``ceil(K / 128)`` matmuls accumulating in PSUM in K order (as the concrete
  trace accumulates), the 512-column blocks a loop of ``ceil(N / 512)``, the row tiles a loop of
  ``ceil(M / 128)``, every instruction masked to the rows below M, the columns below N and the features below K;
* the rows of a ragged last K tile past K are zero in both operands (a masked memset, empty, so dropped, for
  every other tile: reference/nki.md §1.3), so the matmul over all 128 partitions adds exact zeros;
* x^T (or LN(x)^T) from whole rows and Tensor-engine transposes for every dtype (``Rows``; exact, so the numbers
  do not depend on how x^T is made).

The numbers match because every instruction computes each element as the concrete trace's does: PSUM sums the
same products in the same K order, the masked elements are never stored, and the NumPy backend rounds a matmul
column, a masked ``bn_stats`` and a ``bn_aggr`` with empty groups as it does in a narrower tile
(tests/backends/test_width_invariant_rounding.py). Modelled speed against the concrete trace:
``python benchmarks/family_instances.py`` (README.md).
"""

import math

import numpy as np

import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import BLOCK_N, PMAX
from .launcher import MAX_K, MAX_N
from .norm_prologue import BN_STATS_FMAX

SBUF_PARTITION_BYTES = 224 * 1024  # a trn2 partition's SBUF (reference/nki.md §1.2 table), the Hub's target


def top(n) -> int:
    """The largest value of a dimension over the family (an int is its own)."""
    if isinstance(n, int):
        return n
    return n.table.bounds(n.expr)[1]


def sbuf_bytes(k: int, n: int, itemsize: int, layernorm: bool = False, epilogue: str = "residual") -> int:
    """SBUF bytes per partition a width family sized for K = ``k`` and N = ``n`` needs, at most: the weight, one
    row tile's rows and x^T (and with ``layernorm`` its normalised rows, gamma and beta columns and 1 KiB for the
    statistics and epsilon), the bias row and its broadcast, the result row (two for ``gelu`` and ``residual``), a
    memset's [128, 128] tile; no slack for placement: the allocator places whatever one copy of each tensor
    fits in (largest first when program order fragments, ``passes/allocate.py``) and the verifier's SBUF rule asks
    it that same question, so every box's top instance allocates (``test_every_box_is_proved_and_allocates``)."""
    kt, width = math.ceil(k / PMAX), math.ceil(n / BLOCK_N) * BLOCK_N
    rows = (3 if layernorm else 2) * kt * PMAX
    extra = 2 * kt * itemsize + 1024 if layernorm else 0
    row_tiles = (2 if epilogue != "none" else 0) + (2 if epilogue in ("gelu", "residual") else 1)
    return itemsize * (kt * width + rows + row_tiles * width + PMAX) + extra


Box = tuple[tuple[int, int], tuple[int, int]]  # (K range, N range), inclusive


def width_boxes(itemsize: int, layernorm: bool = False, epilogue: str = "residual") -> list[Box]:
    """The (K range, N range) of each width family for an ``itemsize``-byte dtype (and ``epilogue``: how many
    result rows it keeps), split where the on-chip
    tensors, sized for the top of the ranges, stop fitting a trn2 partition's SBUF: per 512-column block count of
    N, K up to the most 128-row tiles that fit with it (consecutive block counts with the same K merged)."""
    boxes: list[Box] = []
    for nb in range(1, MAX_N // BLOCK_N + 1):
        fits = [t for t in range(1, MAX_K // PMAX + 1)
                if sbuf_bytes(t * PMAX, nb * BLOCK_N, itemsize, layernorm, epilogue) <= SBUF_PARTITION_BYTES]
        kt = max(fits, default=0)
        if kt == 0:
            break
        if boxes and boxes[-1][0][1] == kt * PMAX:
            boxes[-1] = (boxes[-1][0], (boxes[-1][1][0], nb * BLOCK_N))
        else:
            boxes.append(((1, kt * PMAX), ((nb - 1) * BLOCK_N + 1, nb * BLOCK_N)))
    return boxes


def linear_widths(x, w, b, residual, out, epilogue, source):
    """The kernel body; ``source(m0)`` makes x^T (or LN(x)^T) of rows ``m0 .. m0 + 127``: [K tiles, 128 features,
    128 rows], the features past K zero (``Rows``, ``LayerNormed``)."""
    m_rows, k_dim = x.shape
    n_dim = w.shape[1]
    kt_max, width = math.ceil(top(k_dim) / PMAX), math.ceil(top(n_dim) / BLOCK_N) * BLOCK_N
    k_tiles, n_blocks, m_tiles = math.ceil(k_dim / PMAX), math.ceil(n_dim / BLOCK_N), math.ceil(m_rows / PMAX)
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    w_sb = load_weight(w, kt_max, width)
    bias = bias_row(b, width) if epilogue != "none" else None

    def row_tile(m0, xT):
        rows_ok = (m0 + i_p < m_rows) & (i_w < n_dim)
        # the row tile's results as whole rows ([128, N]): the residual in and the result out in one transfer
        # each, not one per 512-column block (a transfer's fixed cost, reference/nki.md §3.4)
        ya = nl.ndarray((nl.par_dim(PMAX), width), dtype=x.dtype)
        yb = nl.ndarray((nl.par_dim(PMAX), width), dtype=x.dtype) if epilogue in ("gelu", "residual") else None
        if epilogue == "residual":
            nisa.dma_copy(dst=yb[i_p, i_w], src=residual[m0 + i_p, i_w], mask=rows_ok)
        for c in nl.affine_range(n_blocks):
            _block(x, w_sb, bias, xT, ya, yb, m0, c * BLOCK_N, n_dim, k_tiles, epilogue)
        y = ya if epilogue in ("none", "bias") else yb
        nl.store(out[m0 + i_p, i_w], value=y[i_p, i_w], mask=rows_ok)

    for m in nl.affine_range(m_tiles):
        row_tile(m * PMAX, source(m * PMAX))

def load_weight(w, tiles_max: int, width: int, col0=0, cols=None):
    """Columns ``col0 .. col0 + cols - 1`` (default: all) of the weight ``w`` [K, N] in SBUF as [tiles_max, 128,
    width]: one transfer per 128-row tile (``ceil(K / 128)`` of them, a loop), the rows past K zero (so that a
    matmul over all 128 partitions of the last tile adds exact zeros), the columns past ``cols`` not data. (One
    transfer per 512-column block instead, so that the first row tile's matmuls start on the first block,
    modelled slower for linear: 37.7 vs 33.7 us at 197 x 768 x 2304 bf16.)"""
    k_dim, cols = w.shape[0], w.shape[1] if cols is None else cols
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    w_sb = nl.ndarray((tiles_max, nl.par_dim(PMAX), width), dtype=w.dtype)
    for j in nl.affine_range(math.ceil(k_dim / PMAX)):
        w_sb[j, i_p, i_w] = nisa.memset((PMAX, width), 0, w.dtype, mask=j * PMAX + i_p >= k_dim)
        nisa.dma_copy(dst=w_sb[j, i_p, i_w], src=w[j * PMAX + i_p, col0 + i_w],
                      mask=(j * PMAX + i_p < k_dim) & (i_w < cols))  # fmt: skip
    return w_sb


def bias_row(b, width: int, col0=0, cols=None):
    """Elements ``col0 .. col0 + cols - 1`` (default: all) of the bias ``b`` as a row (one descriptor) broadcast to
    the 128 partitions, [128, width]; the columns past ``cols`` not data."""
    n_dim, cols = b.shape[0], b.shape[0] if cols is None else cols
    i_w = nl.arange(width)[None, :]
    row = nl.ndarray((nl.par_dim(1), width), dtype=b.dtype)
    nisa.dma_copy(dst=row[0, i_w], src=b.reshape((1, n_dim))[0, col0 + i_w], mask=i_w < cols)
    return row.broadcast_to((PMAX, width))


def scalar_column(value):
    """``value`` on every partition, [128, 1] float32: a compile-time constant (a Python number), or a runtime scalar
    (a one-element float32 array in HBM, the manifest's ``scalars``: one published IR serves every value), read onto
    every partition by one DMA."""
    if not hasattr(value, "shape"):
        return nl.full((nl.par_dim(PMAX), 1), value, dtype=nl.float32)
    i_p, i_0 = nl.arange(PMAX)[:, None], nl.arange(1)[None, :]
    col = nl.ndarray((nl.par_dim(PMAX), 1), dtype=nl.float32)
    nisa.dma_copy(dst=col[i_p, i_0], src=value.reshape((1, 1))[0 * i_p, i_0])
    return col


class Rows:
    """x^T: whole rows in (one transfer), transposed 128 features at a time on the Tensor engine and copied out of
    PSUM by the Scalar engine (``kernel._RowsTransposed``; DMA transposes instead, one per K tile since the tile
    count is symbolic, made the family DMA-bound: modelled 171.6 vs 78.7 us at 1576 x 1024 x 1024 bf16)."""

    def __init__(self, x):
        self.x, self.kt_max = x, math.ceil(top(x.shape[1]) / PMAX)

    def rows(self, m0):
        """Rows ``m0 .. m0 + 127`` of x, [128, K tiles * 128] (the columns past K are not data)."""
        i_p, i_f = nl.arange(PMAX)[:, None], nl.arange(self.kt_max * PMAX)[None, :]
        rows = nl.ndarray((nl.par_dim(PMAX), self.kt_max * PMAX), dtype=self.x.dtype)
        nisa.dma_copy(dst=rows[i_p, i_f], src=self.x[m0 + i_p, i_f],
                      mask=(m0 + i_p < self.x.shape[0]) & (i_f < self.x.shape[1]))  # fmt: skip
        return rows

    def __call__(self, m0):
        return self.transpose(self.rows(m0), m0)

    def transpose(self, rows, m0, scale=None, bias=None):
        """``rows^T`` per K tile (through a PSUM tile each, allocated per iteration so that transpose j+1 need not
        wait for copy j), the PSUM copy with per-feature ``scale`` and ``bias`` columns ([128, K tiles]) if given;
        then a ragged last K tile's features past K set to zero (what the transposes made of the columns past K
        is not data; for every other tile the memset's mask is empty and it is dropped, reference/nki.md §1.3)."""
        x, k_dim = self.x, self.x.shape[1]
        i_p, i_r = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
        xT = nl.ndarray((self.kt_max, nl.par_dim(PMAX), PMAX), dtype=x.dtype)
        cols_ok = m0 + i_r < x.shape[0]
        for j in nl.affine_range(math.ceil(k_dim / PMAX)):
            t_ps = nl.ndarray((nl.par_dim(PMAX), PMAX), dtype=x.dtype, buffer=nl.psum)
            t_ps[i_p, i_r] = nisa.nc_transpose(rows[i_p, j * PMAX + i_r], mask=cols_ok)
            if scale is None:
                xT[j, i_p, i_r] = nisa.activation(nl.copy, t_ps[i_p, i_r], mask=cols_ok)
            else:
                xT[j, i_p, i_r] = nisa.activation(nl.copy, t_ps[i_p, i_r], scale=scale[i_p, j], bias=bias[i_p, j],
                                                  mask=cols_ok)  # fmt: skip
            xT[j, i_p, i_r] = nisa.memset((PMAX, PMAX), 0, x.dtype, mask=j * PMAX + i_p >= k_dim)
        return xT


class LayerNormed(Rows):
    """``LN(x)^T`` with ``norm_prologue.LayerNormPrologue``'s instructions (``normalise`` then ``transpose``), so
    that an instance computes the concrete trace's numbers: ``bn_stats`` per 512 columns (a loop of
    ``ceil(K / 512)``, the last masked to the columns below K), ``bn_aggr`` over every chunk's slots (those past
    the last chunk zero: a group of no elements adds nothing), ``rsqrt``, the normalisation as one Scalar
    ``activation``, gamma and beta as the transposes' PSUM-copy scale and bias."""

    def __init__(self, x, gamma, beta, epsilon, z_on_vector=False):
        super().__init__(x)
        self.z_on_vector = z_on_vector
        k_dim, kt = x.shape[1], self.kt_max
        self.chunks_max = math.ceil(self.kt_max * PMAX / BN_STATS_FMAX)
        # gamma and beta as columns: cols[p, j] = vec[128 j + p], one transfer each
        i_p, i_j = nl.arange(PMAX)[:, None], nl.arange(kt)[None, :]
        self.cols = []
        for vec in (gamma, beta):
            cols = nl.ndarray((nl.par_dim(PMAX), kt), dtype=vec.dtype)
            nisa.dma_copy(dst=cols[i_p, i_j], src=vec.reshape((k_dim, 1))[i_j * PMAX + i_p, 0],
                          mask=i_j * PMAX + i_p < k_dim)  # fmt: skip
            self.cols.append(cols)
        self.eps = scalar_column(epsilon)

    def __call__(self, m0):
        x, k_dim = self.x, self.x.shape[1]
        rows = self.rows(m0)
        i_p = nl.arange(PMAX)[:, None]
        ok = m0 + i_p < x.shape[0]
        at = 6 * self.chunks_max  # after the bn_stats: mean, variance, rstd, -mean * rstd
        st = nl.ndarray((nl.par_dim(PMAX), at + 4), dtype=nl.float32)
        i_s = nl.arange(at)[None, :]
        st[i_p, i_s] = nisa.memset((PMAX, at), 0, nl.float32)
        i_c = nl.arange(BN_STATS_FMAX)[None, :]
        for c in nl.affine_range(math.ceil(k_dim / BN_STATS_FMAX)):
            st[i_p, 6 * c + nl.arange(6)[None, :]] = nisa.bn_stats(rows[i_p, c * BN_STATS_FMAX + i_c],
                                                                   mask=ok & (c * BN_STATS_FMAX + i_c < k_dim),
                                                                   dtype=nl.float32)  # fmt: skip
        st[i_p, at + nl.arange(2)[None, :]] = nisa.bn_aggr(st[i_p, i_s], mask=ok)
        st[i_p, at + 2] = nisa.activation(nl.rsqrt, st[i_p, at + 1], bias=self.eps[i_p, 0], mask=ok)
        i_f = nl.arange(self.kt_max * PMAX)[None, :]
        z = nl.ndarray((nl.par_dim(PMAX), self.kt_max * PMAX), dtype=x.dtype)
        if self.z_on_vector:  # (x - mean) * rstd on the Vector engine, as LayerNormPrologue.normalise_many does
            z[i_p, i_f] = nisa.tensor_scalar(rows[i_p, i_f], nl.subtract, st[i_p, at], op1=nl.multiply,
                                             operand1=st[i_p, at + 2], mask=ok & (i_f < k_dim), dtype=x.dtype)
        else:
            st[i_p, at + 3] = nisa.tensor_scalar(st[i_p, at], nl.multiply, st[i_p, at + 2], op1=nl.multiply,
                                                 operand1=-1.0, mask=ok)  # fmt: skip
            z[i_p, i_f] = nisa.activation(nl.copy, rows[i_p, i_f], scale=st[i_p, at + 2], bias=st[i_p, at + 3],
                                          mask=ok & (i_f < k_dim), dtype=x.dtype)  # fmt: skip
        return self.transpose(z, m0, *self.cols)


def _block(x, w_sb, bias, xT, ya, yb, m0, n0, n_dim, k_tiles, epilogue):
    """Output block rows ``m0 ..``, columns ``n0 .. n0 + 511``: the K tiles' matmuls accumulating in one PSUM
    bank in K order (the first overwrites it), then ``kernel._epilogue``'s instructions into columns ``n0 ..`` of
    the row tiles ``ya`` (and ``yb``, holding the residual rows), masked to the rows below M and columns below N."""
    i_p, i_c = nl.arange(PMAX)[:, None], nl.arange(BLOCK_N)[None, :]
    i_m = nl.arange(PMAX)[None, :]
    ok = (m0 + i_p < x.shape[0]) & (n0 + i_c < n_dim)
    acc = nl.ndarray((nl.par_dim(PMAX), BLOCK_N), dtype=nl.float32, buffer=nl.psum)
    acc[i_p, i_c] = nisa.nc_matmul(xT[0, i_p, i_m], w_sb[0, i_p, n0 + i_c], mask=ok)
    for j in nl.affine_range(k_tiles - 1):
        acc[i_p, i_c] += nisa.nc_matmul(xT[j + 1, i_p, i_m], w_sb[j + 1, i_p, n0 + i_c], mask=ok)
    a, b = ya[i_p, n0 + i_c], None if yb is None else yb[i_p, n0 + i_c]
    if epilogue == "none":
        a[...] = nisa.tensor_copy(acc[i_p, i_c], dtype=x.dtype, mask=ok)
    else:
        a[...] = nisa.tensor_tensor(acc[i_p, i_c], bias[i_p, n0 + i_c], np.add, dtype=x.dtype, mask=ok)
    if epilogue == "gelu":
        b[...] = nisa.activation(nl.gelu_apprx_tanh, a, dtype=x.dtype, mask=ok)
    elif epilogue == "residual":  # b holds the residual rows
        b[...] = nisa.tensor_tensor(a, b, np.add, dtype=x.dtype, mask=ok, engine=nisa.gpsimd_engine)


# -- the families kernel.toml declares ----------------------------------------------------------------------------

DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}
# layernorm_linear's width families take epsilon at run time (``launcher.runtime_scalar``); its row-count and fixed
# specialisations fix it at the plan's default, 1e-6
SCALARS = {"epsilon": "float32"}


def families(entry: str) -> list[tuple[list[str], dict[str, str], dict[str, object], dict[str, str]]]:
    """``(args, dims, constants, scalars)`` of every width family of ``linear`` or ``layernorm_linear``, as
    kernel.toml lists them (tests/kernels/test_linear_width_families.py checks that it does): per dtype and epilogue,
    one family per ``width_boxes`` box, M in 1..65536; layernorm_linear's epsilon a runtime scalar."""
    out = []
    for dtype, itemsize in DTYPES.items():
        epilogues = ("none", "bias", "gelu", "residual") if entry == "linear" else ("none", "bias", "gelu")
        for epilogue in epilogues:
            for (k0, k1), (n0, n1) in width_boxes(itemsize, entry == "layernorm_linear", epilogue):
                x, w, b = f"M x K:{dtype}", f"K x N:{dtype}", f"N:{dtype}"
                if entry == "linear":
                    args = [x, w] + ([b] if epilogue != "none" else [])
                    args += [f"M x N:{dtype}"] if epilogue == "residual" else []
                    scalars = {}
                else:
                    args = [x, f"K:{dtype}", f"K:{dtype}", w] + ([b] if epilogue != "none" else [])
                    scalars = SCALARS
                dims = {"M": "1..65536", "K": f"{k0}..{k1}", "N": f"{n0}..{n1}"}
                out.append((args, dims, {"epilogue": epilogue}, scalars))
    return out


def toml_line(args, dims, constants, scalars=None) -> str:
    def value(v):
        return f'"{v}"' if isinstance(v, str) else repr(v)

    def table(d):
        return f"{{ {', '.join(f'{k} = {value(v)}' for k, v in d.items())} }}"

    fields = [f"args = [{', '.join(value(a) for a in args)}]", f"dims = {table(dims)}",
              f"constants = {table(constants)}"]  # fmt: skip
    fields += [f"scalars = {table(scalars)}"] if scalars else []
    return "    { " + ", ".join(fields) + " },"


if __name__ == "__main__":  # the lines of kernel.toml: python -m kernels.linear.widths linear
    import sys

    print("\n".join(toml_line(*f) for f in families(sys.argv[1])))
