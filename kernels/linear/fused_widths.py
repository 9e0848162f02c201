"""The fused kernels (``mlp``, ``layernorm_mlp``, ``layernorm_qkv``) for a shape family whose widths are symbols,
as their kernels dispatch it: the same numbers as the concrete trace, bit for bit, at every instance
(tests/kernels/test_fused_width_families.py).

Like ``widths`` (whose pieces these are built from: ``load_weight``, ``bias_row``, ``Rows`` / ``LayerNormed`` and
``_block``), one plain schedule for every width, the on-chip tensors sized for the top of the family's ranges and
every loop a symbolic trip count with masked instructions. Per 128 rows (tokens), a loop of ``ceil(M / 128)``:

* ``mlp`` / ``layernorm_mlp``: x^T (or LN(x)^T, its normalisation on the Vector engine as
  ``LayerNormPrologue.normalise_many`` does it) from ``widths``; fc1 transposed as in ``fused_mlp._fc1`` (a
  [128 of K, 128 hidden] block of w1 stationary, x^T moving, K tiles accumulating in PSUM in K order, bias + GELU
  in the Scalar copy out of PSUM), the hidden units past H set to zero; then fc2 as ``widths._block``'s residual
  epilogue with h^T as its x^T (bias on the Vector engine, residual on GpSimd, as ``fused_mlp._fc2``).
* ``layernorm_qkv``: q^T and (scale * k)^T per 128 features (w stationary, LN(x)^T moving, one Scalar copy with
  the bias column and, for k, the scale: ``qkv_split._Projection.qk``), V token-major per 512 columns with the
  bias row added on the Vector engine (``_Projection.values``).

The concrete kernels' token blocks of 512 (h^T [H, 512] in SBUF) are 128-token tiles here: h^T then takes a
quarter of the SBUF, which is what lets the widest weights fit (the SBUF limit, ``sbuf_bytes``, is what splits a
kernel's families into boxes; ``boxes``). Modelled speed against the concrete trace: benchmarks/family_instances.py.
"""

import math

import numpy as np

import nki_dsl.isa as nisa
import nki_dsl.language as nl

from .kernel import BLOCK_N, PMAX
from .launcher import MAX_K, MAX_N
from .widths import SBUF_PARTITION_BYTES, _block, bias_row, load_weight, scalar_column, top
from .widths import sbuf_bytes as linear_sbuf_bytes


def _hidden_T(x, xT, w1_sb, b1T, m0, k_tiles, h_dim, ht_max):
    """h^T = gelu(w1^T x^T + b1) of rows ``m0 .. m0 + 127``: [H tiles, 128 hidden, 128 rows], the hidden units past
    H zero (fc2 contracts over all 128 partitions of the last tile)."""
    i_p, i_r = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    hT = nl.ndarray((ht_max, nl.par_dim(PMAX), PMAX), dtype=x.dtype)
    for jh in nl.affine_range(math.ceil(h_dim / PMAX)):
        ok = (jh * PMAX + i_p < h_dim) & (m0 + i_r < x.shape[0])
        acc = nl.ndarray((nl.par_dim(PMAX), PMAX), dtype=nl.float32, buffer=nl.psum)
        acc[i_p, i_r] = nisa.nc_matmul(w1_sb[0, i_p, jh * PMAX + i_r], xT[0, i_p, i_r], mask=ok)
        for j in nl.affine_range(k_tiles - 1):
            acc[i_p, i_r] += nisa.nc_matmul(w1_sb[j + 1, i_p, jh * PMAX + i_r], xT[j + 1, i_p, i_r], mask=ok)
        hT[jh, i_p, i_r] = nisa.activation(nl.gelu_apprx_tanh, acc[i_p, i_r], bias=b1T[i_p, jh], dtype=x.dtype,
                                           mask=ok)  # fmt: skip
        hT[jh, i_p, i_r] = nisa.memset((PMAX, PMAX), 0, x.dtype, mask=jh * PMAX + i_p >= h_dim)
    return hT


def columns(vec, tiles_max, col0=0, count=None):
    """Elements ``col0 + 128 j + p`` of ``vec`` at [p, j] ([128, tiles_max], one transfer; ``count`` elements,
    default all): a per-partition column per 128 of them (``norm_prologue.norm_columns``' values)."""
    n, count = vec.shape[0], vec.shape[0] if count is None else count
    i_p, i_j = nl.arange(PMAX)[:, None], nl.arange(tiles_max)[None, :]
    cols = nl.ndarray((nl.par_dim(PMAX), tiles_max), dtype=vec.dtype)
    nisa.dma_copy(dst=cols[i_p, i_j], src=vec.reshape((n, 1))[col0 + i_j * PMAX + i_p, 0],
                  mask=i_j * PMAX + i_p < count)  # fmt: skip
    return cols


def mlp_widths(x, w1, b1, w2, b2, residual, out, source):
    """``residual + gelu(x @ w1 + b1) @ w2 + b2``; ``source(m0)`` makes x^T (or LN(x)^T) of rows ``m0 ..``
    (``widths.Rows``, ``widths.LayerNormed``)."""
    m_rows, k_dim = x.shape
    h_dim, n_dim = w2.shape
    kt_max, ht_max = math.ceil(top(k_dim) / PMAX), math.ceil(top(h_dim) / PMAX)
    width = math.ceil(top(n_dim) / BLOCK_N) * BLOCK_N
    k_tiles, h_tiles = math.ceil(k_dim / PMAX), math.ceil(h_dim / PMAX)
    w1_sb = load_weight(w1, kt_max, ht_max * PMAX)  # fc1 first in DMA order
    b1T = columns(b1, ht_max)
    w2_sb = load_weight(w2, ht_max, width)
    bias = bias_row(b2, width)
    i_p, i_w = nl.arange(PMAX)[:, None], nl.arange(width)[None, :]
    for m in nl.affine_range(math.ceil(m_rows / PMAX)):
        m0 = m * PMAX
        hT = _hidden_T(x, source(m0), w1_sb, b1T, m0, k_tiles, h_dim, ht_max)
        rows_ok = (m0 + i_p < m_rows) & (i_w < n_dim)
        ya, yb = (nl.ndarray((nl.par_dim(PMAX), width), dtype=x.dtype) for _ in range(2))
        nisa.dma_copy(dst=yb[i_p, i_w], src=residual[m0 + i_p, i_w], mask=rows_ok)
        for c in nl.affine_range(math.ceil(n_dim / BLOCK_N)):
            _block(x, w2_sb, bias, hT, ya, yb, m0, c * BLOCK_N, n_dim, h_tiles, "residual")
        nl.store(out[m0 + i_p, i_w], value=yb[i_p, i_w], mask=rows_ok)


def qkv_widths(x, w, b, qkT, v, scale, source):
    """``(qkT, v)`` of ``qkv_split.layernorm_qkv_kernel``; ``source``: ``widths.LayerNormed``; ``scale`` a number or
    a runtime scalar (``widths.scalar_column``)."""
    m_rows, k_dim = x.shape
    n_dim = w.shape[1]
    hd = n_dim // 3  # a multiple of 128 (the family's N is a multiple of 384)
    hd_max = top(n_dim) // 3
    ht_max, width = hd_max // PMAX, math.ceil(hd_max / BLOCK_N) * BLOCK_N
    kt_max = math.ceil(top(k_dim) / PMAX)
    k_tiles, half = math.ceil(k_dim / PMAX), hd // PMAX
    i_p, i_r = nl.arange(PMAX)[:, None], nl.arange(PMAX)[None, :]
    # q's and k's feature tiles as one loop of 2 * hd / 128 (an HBM access inside a loop must use one multiple of
    # each dimension symbol, and an on-chip index none, so k's cannot be a loop of its own starting at hd): per
    # tile its bias column (k's times the scale, in fp32 as _Projection makes them) and its scale as a column,
    # 1 for q's (the NumPy backend multiplies by a column's fp32 value as by the immediate)
    ft_max = 2 * ht_max
    i_g = nl.arange(ft_max)[None, :]
    b_cols = columns(b, ft_max, 0, 2 * hd)
    # (a runtime scale as a [128, 1] column: the products are the immediate's, in fp32, as the NumPy backend and the
    # engines compute a tensor_scalar)
    scale_col = None if isinstance(scale, float | int) else scalar_column(scale)
    factor = float(scale) if scale_col is None else scale_col[i_p, 0]
    qk_bias = nl.ndarray((nl.par_dim(PMAX), ft_max), dtype=nl.float32)
    qk_bias[i_p, i_g] = nisa.tensor_copy(b_cols[i_p, i_g], dtype=nl.float32, mask=i_g < half)
    qk_bias[i_p, i_g] = nisa.tensor_scalar(b_cols[i_p, i_g], np.multiply, factor, dtype=nl.float32,
                                           mask=(i_g >= half) & (i_g < 2 * half))  # fmt: skip
    qk_scale = nl.ndarray((nl.par_dim(PMAX), ft_max), dtype=nl.float32)
    qk_scale[i_p, i_g] = nisa.memset((PMAX, ft_max), 1.0, nl.float32)
    if scale_col is None:
        qk_scale[i_p, i_g] = nisa.memset((PMAX, ft_max), float(scale), nl.float32, mask=i_g >= half)
    else:
        qk_scale[i_p, i_g] = nisa.tensor_scalar(qk_scale[i_p, i_g], np.multiply, factor, dtype=nl.float32,
                                                mask=i_g >= half)  # fmt: skip
    v_bias = bias_row(b, width, 2 * hd, hd)
    wqk_sb = load_weight(w, kt_max, ft_max * PMAX, 0, 2 * hd)
    wv_sb = load_weight(w, kt_max, width, 2 * hd, hd)
    i_w = nl.arange(width)[None, :]
    for m in nl.affine_range(math.ceil(m_rows / PMAX)):
        m0 = m * PMAX
        xT = source(m0)
        cols_ok = m0 + i_r < m_rows
        qk = nl.ndarray((ft_max, nl.par_dim(PMAX), PMAX), dtype=x.dtype)  # the tile's q^T and k^T, one store
        for g in nl.affine_range(2 * half):
            acc = nl.ndarray((nl.par_dim(PMAX), PMAX), dtype=nl.float32, buffer=nl.psum)
            acc[i_p, i_r] = nisa.nc_matmul(wqk_sb[0, i_p, g * PMAX + i_r], xT[0, i_p, i_r], mask=cols_ok)
            for j in nl.affine_range(k_tiles - 1):
                acc[i_p, i_r] += nisa.nc_matmul(wqk_sb[j + 1, i_p, g * PMAX + i_r], xT[j + 1, i_p, i_r],
                                                mask=cols_ok)  # fmt: skip
            qk[g, i_p, i_r] = nisa.activation(nl.copy, acc[i_p, i_r], scale=qk_scale[i_p, g], bias=qk_bias[i_p, g],
                                              dtype=x.dtype, mask=cols_ok)  # fmt: skip
        # every feature tile in one transfer ([128, tiles, 128]: one fixed cost, reference/nki.md §3.4)
        i_f3, i_g3 = nl.arange(PMAX)[:, None, None], nl.arange(ft_max)[None, :, None]
        i_r3 = nl.arange(PMAX)[None, None, :]
        nisa.dma_copy(dst=qkT[i_g3 * PMAX + i_f3, m0 + i_r3], src=qk[i_g3, i_f3, i_r3],
                      mask=(i_g3 < 2 * half) & (m0 + i_r3 < m_rows))  # fmt: skip
        y = nl.ndarray((nl.par_dim(PMAX), width), dtype=x.dtype)
        for c in nl.affine_range(math.ceil(hd / BLOCK_N)):
            _block(x, wv_sb, v_bias, xT, y, None, m0, c * BLOCK_N, hd, k_tiles, "bias")
        nl.store(v[m0 + i_p, i_w], value=y[i_p, i_w], mask=(m0 + i_p < m_rows) & (i_w < hd))


# -- the families kernel.toml declares ----------------------------------------------------------------------------

H_BLOCK = 512  # hidden units per step of the MLP boxes' H ranges
QKV_STEP = 3 * PMAX  # 3 * hd, hd a multiple of 128 (plan_layernorm_qkv)
QKV_BLOCK = 4 * QKV_STEP  # N per step of the qkv boxes' N ranges



def sbuf_bytes(entry: str, k: int, n: int, itemsize: int, h: int = 0) -> int:
    """SBUF bytes per partition a family of ``entry`` sized for K = ``k``, N = ``n`` (the MLPs' output width, the
    qkv's 3 * hd) and H = ``h`` (the MLPs' hidden width) needs, at most (as ``widths.sbuf_bytes``, whose terms these
    reuse): the MLPs are fc2 as a residual linear over (H, N) (its "x^T" h^T) plus w1 [K tiles, 128, H], x^T's (and
    LN's) row buffers and b1's columns; layernorm_qkv is a bias linear over (K, 2 * hd) plus V's weight, bias and
    result rows, the q/k tile and its bias columns."""
    kt, s = math.ceil(k / PMAX), itemsize
    layernorm = entry != "mlp"
    rows = (3 if layernorm else 2) * kt * PMAX * s + (2 * kt * s + 1024 if layernorm else 0)
    if entry == "layernorm_qkv":
        hd = n // 3
        v_width = math.ceil(hd / BLOCK_N) * BLOCK_N
        qk = linear_sbuf_bytes(k, 2 * hd, s, True, "bias")
        return qk + s * (kt * v_width + 3 * v_width + 2 * hd // PMAX) + 8
    ht = math.ceil(h / PMAX)
    return linear_sbuf_bytes(h, n, s, False, "residual") + s * (kt * ht * PMAX + ht) + rows


def boxes(entry: str, itemsize: int) -> list[tuple[tuple[int, int], ...]]:
    """The ranges of each family of ``entry``: ``((K range), (N range))`` for layernorm_qkv (N in steps of 384) and
    layernorm_mlp (whose N is K: one range), ``((K), (H), (N))`` for mlp; per H block of 512 (and for mlp per
    N block of 512; layernorm_qkv per N block of 1536), K up to the most 128-row tiles that fit a trn2 partition's
    SBUF with the tensors sized for the box's top (consecutive blocks with the same K merged)."""
    def k_max(n, h=0):
        """The most K (whole 128-row tiles) that fits with N = ``n`` (layernorm_mlp: N is K) and H = ``h``."""
        fits = [t * PMAX for t in range(1, MAX_K // PMAX + 1)
                if sbuf_bytes(entry, t * PMAX, t * PMAX if entry == "layernorm_mlp" else n, itemsize, h)
                <= SBUF_PARTITION_BYTES]  # fmt: skip
        return max(fits, default=0)

    out = []
    if entry == "layernorm_qkv":
        n_top = MAX_N // QKV_STEP * QKV_STEP
        for n0 in range(QKV_STEP, n_top + 1, QKV_BLOCK):
            # the last block takes a remainder of one step with it (a range of one value would make N concrete)
            n1 = n_top if n_top - (n0 + QKV_BLOCK - QKV_STEP) <= QKV_STEP else n0 + QKV_BLOCK - QKV_STEP
            if k_max(n1):
                out.append(((1, k_max(n1)), (n0, n1)))
            if n1 == n_top:
                break
        return out
    for h1 in range(H_BLOCK, MAX_N + 1, H_BLOCK):
        h_range = (h1 - H_BLOCK + 1, h1)
        if entry == "layernorm_mlp":
            k1 = k_max(0, h1)
            if k1:
                out.append(((1, k1), h_range))
            continue
        for n1 in range(BLOCK_N, MAX_N + 1, BLOCK_N):
            k1 = k_max(n1, h1)
            if not k1:
                break
            if out and out[-1][1] == h_range and out[-1][0][1] == k1:
                out[-1] = (out[-1][0], h_range, (out[-1][2][0], n1))
            else:
                out.append(((1, k1), h_range, (n1 - BLOCK_N + 1, n1)))
    return out


DTYPES = {"mlp": ("bfloat16", "float16"), "layernorm_mlp": ("float32", "bfloat16", "float16")}
DTYPES["layernorm_qkv"] = DTYPES["layernorm_mlp"]
# The LayerNorm kernels' width families take epsilon (and layernorm_qkv's softmax scale) at run time, one-element
# float32 arrays after the arrays (``launcher.runtime_scalar``); the row-count and fixed specialisations fix them
SCALARS = {"mlp": {}, "layernorm_mlp": {"epsilon": "float32"},
           "layernorm_qkv": {"scale": "float32", "epsilon": "float32"}}  # fmt: skip


def arg_shapes(entry: str, m, k, h, n) -> list[tuple]:
    """The shapes of an entry point's arguments for M = ``m``, K = ``k``, H = ``h`` and N = ``n`` (ints or names;
    layernorm_mlp's N is K and layernorm_qkv has no H)."""
    if entry == "mlp":
        return [(m, k), (k, h), (h,), (h, n), (n,), (m, n)]
    if entry == "layernorm_mlp":
        return [(m, k), (k,), (k,), (k, h), (h,), (h, k), (k,)]
    return [(m, k), (k,), (k,), (k, n), (n,)]


def families(entry: str) -> list[tuple[list[str], dict[str, str], dict[str, object], dict[str, str]]]:
    """``(args, dims, constants, scalars)`` of every width family of a fused entry point, as kernel.toml lists them
    (tests/kernels/test_fused_width_families.py checks that it does): per dtype, one family per ``boxes`` box (then
    the MLPs' ``streamed_boxes``), M in 1..65536."""
    from .widths import DTYPES as ITEMSIZE

    out = []
    for dtype in DTYPES[entry]:
        args = [" x ".join(map(str, shape)) + f":{dtype}" for shape in arg_shapes(entry, "M", "K", "H", "N")]
        streamed = streamed_boxes(entry, ITEMSIZE[dtype])
        for box in boxes(entry, ITEMSIZE[dtype]) + streamed:
            names = {"mlp": "KHN", "layernorm_mlp": "KH", "layernorm_qkv": "KN"}[entry]
            dims = {"M": "1..65536"} | {d: f"{lo}..{hi}" for d, (lo, hi) in zip(names, box)}
            schedule = {"schedule": "streamed"} if box in streamed else {}
            if entry == "layernorm_qkv":
                dims["N"] += f" step {QKV_STEP}"
            out.append((args, dims, schedule, SCALARS[entry]))
    return out


def streamed_boxes(entry: str, itemsize: int) -> list[tuple[tuple[int, int], ...]]:
    """The MLPs' families with the weights streamed by hidden blocks (``fused_streamed.boxes``), after the resident
    ones; layernorm_qkv has none."""
    from . import fused_streamed

    return fused_streamed.boxes(entry, itemsize, MAX_K, MAX_N) if entry != "layernorm_qkv" else []


def _holding(box_list, entry, k, n, h):
    point = {"mlp": (k, h, n), "layernorm_mlp": (k, h), "layernorm_qkv": (k, n)}[entry]
    return next((box for box in box_list if all(lo <= v <= hi for v, (lo, hi) in zip(point, box))), None)


def resident_box(entry: str, itemsize: int, k: int, n: int, h: int = 0):
    """The resident box holding K = ``k``, N = ``n`` (layernorm_mlp: N is K) and H = ``h``, or None."""
    return _holding(boxes(entry, itemsize), entry, k, n, h)


def box_of(entry: str, itemsize: int, k: int, n: int, h: int = 0):
    """The box holding K = ``k``, N = ``n`` (layernorm_mlp: N is K) and H = ``h``, resident first, then streamed, or
    None: no family serves the shape, and the launcher refuses it (``launcher._check_fits``)."""
    found = resident_box(entry, itemsize, k, n, h)
    return found if found is not None else _holding(streamed_boxes(entry, itemsize), entry, k, n, h)


if __name__ == "__main__":  # the lines of kernel.toml: python -m kernels.linear.fused_widths mlp
    import sys

    from .widths import toml_line

    print("\n".join(toml_line(*f) for f in families(sys.argv[1])))
