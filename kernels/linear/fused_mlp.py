"""The fused MLP of a transformer block: ``out = residual + gelu(x @ w1 + b1) @ w2 + b2``, the hidden activations
never leaving SBUF.

fc1 runs transposed: ``h^T = w1^T x^T`` with a [128, 128] block of w1 stationary and x^T [K1, 512 tokens] moving,
so the hidden units land on the PSUM partitions and fc1's bias is a per-partition value: bias and GELU (tanh
approximation) are one Scalar-engine ``activation`` straight out of PSUM. The resulting h^T tiles [128 hidden, 512
tokens] are exactly fc2's stationary operands (hidden units, fc2's contraction, on the partitions), so fc2 needs no
transpose either: per 128 tokens, ``sum over hidden tiles of h^T.T @ w2`` into a PSUM bank, then the bias
(Vector, PSUM + SBUF) and the residual (GpSimd) on the way out. Compared with two ``linear`` launches this saves
the hidden activations' round trip through HBM and fc2's DMA transposes of them.

Tokens go in blocks of 512 (the moving tile's width; ``token_blocks``), the ragged last block with its static size,
or in a shape family masked to the rows below M; both weights stay in SBUF. x^T comes in by DMA transpose (2-byte
dtypes only, as in ``linear``).
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

from . import token_blocks
from .kernel import ChunkedWeight, _load_weight, _static
from .norm_prologue import LayerNormPrologue, norm_columns
from .token_blocks import BLOCK, Span  # BLOCK: fc1's moving width

PMAX = 128
W1_CHUNK = 1024  # hidden units of w1 per load (see _weights)
FC2_STREAMING_ACCUMULATORS = 4  # fc2 outputs (PSUM banks) a block may keep to stream w2 (see _fc2)
GROUP_BLOCKS = 4  # token blocks pipelined together by the LayerNorm MLP (static code of that many blocks)


def _chunks(n, size):
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def _x_transposed(x, span, k1_tiles):
    i_t, i_r = nl.arange(span.width)[None, :], nl.arange(span.width)[:, None]
    xT = nl.ndarray((len(k1_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    for j, (k0, ks) in enumerate(k1_tiles):
        xT[j, nl.arange(ks)[:, None], i_t] = nl.load_transpose2d(x[span.t0 + i_r, k0 + nl.arange(ks)[None, :]],
                                                                 mask=span.valid(i_r))  # fmt: skip
    return xT


def _fc1(x, xT, w1_sb, b1T, span, k1_tiles, h_tiles):
    """h^T [hidden tiles, 128, tokens] of one token block (``token_blocks.Span``)."""
    i_t = nl.arange(span.width)[None, :]
    ok = span.valid(i_t)  # the tokens are the free axis
    # fc1, transposed: h^T [hidden tile, tokens], bias + GELU fused into the copy out of PSUM (Scalar engine).
    hT = nl.ndarray((len(h_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    ring1 = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
    for jh, (h0, hs) in enumerate(h_tiles):
        i_h = nl.arange(hs)[:, None]
        for j, (_, ks) in enumerate(k1_tiles):
            prod = nisa.nc_matmul(w1_sb.tile(j, ks, h0, hs), xT[j, nl.arange(ks)[:, None], i_t], mask=ok)
            if j == 0:
                ring1[jh % 2, i_h, i_t] = prod
            else:
                ring1[jh % 2, i_h, i_t] += prod
        hT[jh, i_h, i_t] = nisa.activation(nl.gelu_apprx_tanh, ring1[jh % 2, i_h, i_t], bias=b1T[i_h, jh],
                                           dtype=x.dtype, mask=ok)  # fmt: skip
    return hT


def _fc2(x, hT, w2_sb, b2, residual, out, span, h_tiles, n_blocks, res_rows=None):
    """fc2 per 128 tokens of ``span``: h^T slices stationary, w2 blocks moving; bias and residual on the way out.
    The residual comes from HBM, or from SBUF row tiles (``res_rows[k]`` holds tokens ``t0 + 128 k ..``).

    A block of at most ``FC2_STREAMING_ACCUMULATORS`` [128 tokens, 512 columns] outputs keeps them all in PSUM
    and runs the hidden tiles in the outer loop: each of w2's row tiles is used as soon as it has arrived, so a
    short block (few tokens, the weights' DMA binding) computes while w2 streams in instead of after it."""
    t0, rows_tiles = span.t0, span.tiles
    outputs = [(s0, ss, n0, ns) for s0, ss in rows_tiles for n0, ns in n_blocks]
    n_dim = out.shape[1]
    # whole output rows per 128 tokens: the residual's rows in and the result's out in one transfer each, not one
    # per 512-column block (reference/nki.md §3.4: every transfer pays ~1.3 us)
    ya = nl.ndarray((len(rows_tiles), nl.par_dim(PMAX), n_dim), dtype=x.dtype)
    yb = nl.ndarray((len(rows_tiles), nl.par_dim(PMAX), n_dim), dtype=x.dtype)
    i_n = nl.arange(n_dim)[None, :]
    if res_rows is None:
        for k, (s0, ss) in enumerate(rows_tiles):
            i_s = nl.arange(ss)[:, None]
            nisa.dma_copy(dst=yb[k, i_s, i_n], src=residual[t0 + s0 + i_s, i_n], mask=span.valid(s0 + i_s))

    def product(jh, s0, ss, n0, ns):
        hs = h_tiles[jh][1]
        return nisa.nc_matmul(hT[jh, nl.arange(hs)[:, None], s0 + nl.arange(ss)[None, :]],
                              w2_sb[jh, nl.arange(hs)[:, None], n0 + nl.arange(ns)[None, :]],
                              mask=span.valid(s0 + nl.arange(ss)[:, None]))  # fmt: skip

    def finish(turn, acc, s0, ss, n0, ns):
        k = s0 // PMAX
        i_s, i_c = nl.arange(ss)[:, None], nl.arange(ns)[None, :]
        ok = span.valid(s0 + i_s)
        ya[k, i_s, n0 + i_c] = nisa.tensor_tensor(acc, b2[i_s, n0 + i_c], np.add, dtype=x.dtype, mask=ok)
        res = yb[k, i_s, n0 + i_c] if res_rows is None else res_rows[k][i_s, n0 + i_c]
        yb[k, i_s, n0 + i_c] = nisa.tensor_tensor(ya[k, i_s, n0 + i_c], res, np.add, dtype=x.dtype,
                                                  engine=nisa.gpsimd_engine, mask=ok)  # fmt: skip
        if n0 + ns == n_dim:  # the row tile's last block: its whole rows out
            nl.store(out[t0 + s0 + i_s, i_n], value=yb[k, i_s, i_n], mask=ok)

    if len(outputs) <= FC2_STREAMING_ACCUMULATORS:
        acc = nl.ndarray((len(outputs), nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
        for jh in range(len(h_tiles)):
            for u, (s0, ss, n0, ns) in enumerate(outputs):
                i_s, i_c = nl.arange(ss)[:, None], nl.arange(ns)[None, :]
                if jh == 0:
                    acc[u, i_s, i_c] = product(jh, s0, ss, n0, ns)
                else:
                    acc[u, i_s, i_c] += product(jh, s0, ss, n0, ns)
        for u, (s0, ss, n0, ns) in enumerate(outputs):
            finish(u, acc[u, nl.arange(ss)[:, None], nl.arange(ns)[None, :]], s0, ss, n0, ns)
        return
    ring2 = nl.ndarray((2, nl.par_dim(PMAX), BLOCK), dtype=nl.float32, buffer=nl.psum)
    for turn, (s0, ss, n0, ns) in enumerate(outputs):
        i_s, i_c = nl.arange(ss)[:, None], nl.arange(ns)[None, :]
        for jh in range(len(h_tiles)):
            if jh == 0:
                ring2[turn % 2, i_s, i_c] = product(jh, s0, ss, n0, ns)
            else:
                ring2[turn % 2, i_s, i_c] += product(jh, s0, ss, n0, ns)
        finish(turn, ring2[turn % 2, i_s, i_c], s0, ss, n0, ns)


def _token_block(x, w1_sb, b1T, w2_sb, b2, residual, out, span, k1_tiles, h_tiles, n_blocks):
    """The tokens of ``span`` (its ``t0`` may be a loop index)."""
    hT = _fc1(x, _x_transposed(x, span, k1_tiles), w1_sb, b1T, span, k1_tiles, h_tiles)
    _fc2(x, hT, w2_sb, b2, residual, out, span, h_tiles, n_blocks)


def _weights(x, w1, b1, w2, b2, k1_tiles, h_tiles, n_dim, between):
    """Both weights into SBUF, w1 first; ``between()`` runs after w1's loads and before w2's (the first token
    block's fc1, so the Tensor engine starts when w1 has arrived instead of after both weights). fc1's bias comes
    first in DMA order (fc1's first PSUM copy needs it), then w1 in column chunks of ``W1_CHUNK`` (hidden units),
    all K rows of a chunk before the next chunk: fc1's first hidden tiles start when the first chunk is in, not
    the whole of w1 (a transfer takes a chunk's rows of several K tiles, >= 4 KiB per partition, so its ~1.3 us
    fixed cost hides behind its streaming, §3.4); w2 likewise, several hidden tiles per transfer. Each chunk of
    w1 is an SBUF tensor of its own (``ChunkedWeight``), so fc1's first hidden tiles do not wait for the last
    chunk."""
    hidden = w1.shape[1]
    b1T = norm_columns((b1,), h_tiles)  # fc1's bias as columns: b1T[p, jh] = b1[jh * 128 + p]
    w1_sb = ChunkedWeight(w1, k1_tiles)
    for c0, cs in _chunks(hidden, W1_CHUNK):  # several K tiles per transfer (>= 4 KiB per partition)
        w1_sb.load(c0, cs)
    first = between(w1_sb, b1T)
    w2_sb = nl.ndarray((len(h_tiles), nl.par_dim(PMAX), n_dim), dtype=w2.dtype)
    _load_weight(w2, w2_sb, h_tiles, 0, n_dim)
    b2_sb = nl.load(b2.reshape((1, n_dim))).broadcast_to((PMAX, n_dim))  # fc2's bias spread over the partitions
    return w1_sb, b1T, w2_sb, b2_sb, first


SCHEDULES = ("auto", "resident", "tiled", "streamed")


def schedule_of(entry, itemsize, k1, hidden, n_dim, schedule="auto"):
    """How the fused kernel runs: "resident" (both weights in SBUF, token blocks of 512: the concrete kernels'),
    "tiled" (both weights in SBUF, one 128-token tile at a time, the on-chip tensors sized for a family's top:
    ``fused_widths``, the resident families' schedule) or "streamed" (the weights by hidden blocks:
    ``fused_streamed``). ``schedule`` given (a family's constant, or the launcher's choice where the concrete kernel
    does not fit SBUF) is taken as it is; "auto": a family over the widths "tiled", concrete widths "resident" where a
    resident box of ``fused_widths`` holds them, else "streamed"."""
    if schedule not in SCHEDULES:
        raise ValueError(f"{entry}: schedule must be one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}")
    if schedule != "auto":
        return schedule
    if _symbolic_widths(k1, hidden, n_dim):
        return "tiled"
    from .fused_widths import resident_box

    return "resident" if resident_box(entry, itemsize, k1, n_dim, hidden) is not None else "streamed"


@nki.jit
def mlp_kernel(x, w1, b1, w2, b2, residual, schedule="auto"):
    """``schedule``: the weights resident in SBUF or streamed by hidden blocks (``schedule_of``)."""
    m_rows, k1 = x.shape
    hidden, n_dim = w2.shape
    out = nl.ndarray((m_rows, n_dim), dtype=x.dtype, buffer=nl.shared_hbm)
    how = schedule_of("mlp", np.dtype(x.dtype).itemsize, k1, hidden, n_dim, schedule)
    if how == "streamed":
        from .fused_streamed import mlp_streamed
        from .widths import Rows

        mlp_streamed(x, w1, b1, w2, b2, residual, out, Rows(x))
        return out
    if how == "tiled":
        from .fused_widths import mlp_widths
        from .widths import Rows

        mlp_widths(x, w1, b1, w2, b2, residual, out, Rows(x))
        return out
    k1_tiles, h_tiles, n_blocks = _chunks(k1, PMAX), _chunks(hidden, PMAX), _chunks(n_dim, BLOCK)
    first, count, tail = token_blocks.split(m_rows)  # a shape family's last block masked (token_blocks)
    # The first token block goes first, in DMA issue order too: its x^T, then w1 (fc1 needs it), then w2 (only
    # fc2 does), so the Tensor engine starts when w1's first tiles arrive instead of after both weights.
    xT0 = _x_transposed(x, first, k1_tiles)
    w1_sb, b1T, w2_sb, b2_sb, hT0 = _weights(x, w1, b1, w2, b2, k1_tiles, h_tiles, n_dim, lambda w1_sb, b1T: _fc1(
        x, xT0, w1_sb, b1T, first, k1_tiles, h_tiles))  # fmt: skip
    _fc2(x, hT0, w2_sb, b2_sb, residual, out, first, h_tiles, n_blocks)
    for blk in nl.affine_range(count):  # the whole blocks after the first
        _token_block(x, w1_sb, b1T, w2_sb, b2_sb, residual, out, Span((blk + 1) * BLOCK, BLOCK), k1_tiles, h_tiles,
                     n_blocks)  # fmt: skip
    if tail is not None:
        _token_block(x, w1_sb, b1T, w2_sb, b2_sb, residual, out, tail, k1_tiles, h_tiles, n_blocks)
    return out


def _symbolic_widths(*dims) -> bool:
    """A shape family over the widths (``fused_widths``), not only the rows."""
    return any(_static(d) is None for d in dims)


def _ln_tiles(base, span):
    return [(base + k, span.t0 + s0, ss, span.valid(s0 + nl.arange(ss)[:, None]))
            for k, (s0, ss) in enumerate(span.tiles)]  # fmt: skip


def _ln_stage1(norm, bufs, base, span, loaded=False):
    """Rows and normalised rows of the tokens of ``span``, 128 at a time into ring slots ``base ..`` (``loaded``:
    the rows are already there, ``norm.load(bufs, _ln_tiles(...))``)."""
    return norm.normalise_many(bufs, _ln_tiles(base, span), loaded=loaded)


def _ln_stage2(norm, x, tiles, span, k1_tiles, xT=None):
    """x^T [K tiles, 128, 512] of one token block from its normalised row tiles (Tensor-engine transposes), into
    ``xT`` if given (else a new tensor)."""
    if xT is None:
        xT = nl.ndarray((len(k1_tiles), nl.par_dim(PMAX), BLOCK), dtype=x.dtype)
    for (s0, ss), (_, z) in zip(span.tiles, tiles):
        norm.transpose(z, ss, xT, s0, span.valid(s0 + nl.arange(ss)[None, :]))
    return xT


def _ln_blocks(x, norm, w1_sb, b1T, w2_sb, b2_sb, out, blocks, k1_tiles, h_tiles, n_blocks, ready=None):
    """Token blocks ``blocks`` (``token_blocks.Span`` each), pipelined one block ahead in program order: block
    t+1's rows and LayerNorm row work (Vector, Scalar) come before block t's fc2, and its transposes after, so the
    in-order engines prepare block t+1 while the Tensor engine computes block t. Each block's rows are kept for its
    residual; ring slots alternate between even and odd blocks. ``ready``: the first block's stage-1 tiles if the
    caller made them."""
    per = BLOCK // PMAX
    bufs = norm.ring(2 * per, PMAX)
    tiles = ready if ready is not None else _ln_stage1(norm, bufs, 0, blocks[0])
    xT = _ln_stage2(norm, x, tiles, blocks[0], k1_tiles)
    for t, span in enumerate(blocks):
        nxt = (t + 1) % 2 * per
        if t + 1 < len(blocks):  # block t+1's rows first in DMA order (bandwidth is booked in issue order)
            norm.load(bufs, _ln_tiles(nxt, blocks[t + 1]))
        hT = _fc1(x, xT, w1_sb, b1T, span, k1_tiles, h_tiles)
        ahead = _ln_stage1(norm, bufs, nxt, blocks[t + 1], loaded=True) if t + 1 < len(blocks) else None
        _fc2(x, hT, w2_sb, b2_sb, None, out, span, h_tiles, n_blocks, res_rows=[r for r, _ in tiles])
        if ahead is not None:
            xT, tiles = _ln_stage2(norm, x, ahead, blocks[t + 1], k1_tiles), ahead


@nki.jit
def layernorm_mlp_kernel(x, gamma, beta, w1, b1, w2, b2, epsilon=1e-6, schedule="auto"):
    """``x + gelu(LN(x) @ w1 + b1) @ w2 + b2``, the pre-norm MLP half of a transformer block in one launch: the
    LayerNorm is fc1's prologue (``norm_prologue``: rows normalised on chip and transposed on the Tensor engine,
    gamma and beta in the transposes' PSUM copies), and the loaded rows of x are also fc2's residual."""
    m_rows, k1 = x.shape
    hidden, n_dim = w2.shape
    out = nl.ndarray((m_rows, n_dim), dtype=x.dtype, buffer=nl.shared_hbm)
    how = schedule_of("layernorm_mlp", np.dtype(x.dtype).itemsize, k1, hidden, n_dim, schedule)
    if how == "streamed":
        from .fused_streamed import mlp_streamed
        from .widths import LayerNormed

        mlp_streamed(x, w1, b1, w2, b2, x, out, LayerNormed(x, gamma, beta, epsilon, z_on_vector=True))
        return out
    if how == "tiled":
        from .fused_widths import mlp_widths
        from .widths import LayerNormed

        mlp_widths(x, w1, b1, w2, b2, x, out, LayerNormed(x, gamma, beta, epsilon, z_on_vector=True))
        return out
    k1_tiles, h_tiles, n_blocks = _chunks(k1, PMAX), _chunks(hidden, PMAX), _chunks(n_dim, BLOCK)
    norm = LayerNormPrologue(x, gamma, beta, epsilon, k1_tiles)
    group = GROUP_BLOCKS
    # runs of `group` blocks (an affine loop; a shape family's masked to the rows below `limit`), then the rest
    # pipelined together (token_blocks.pipeline)
    full, limit, rest = token_blocks.pipeline(m_rows, group)
    # the first group's first block before the weights, in DMA issue order too
    first = rest if _static(full) == 0 else None
    bufs0 = norm.ring(BLOCK // PMAX, PMAX)
    ready = _ln_stage1(norm, bufs0, 0, first[0]) if first else None
    w1_sb, b1T, w2_sb, b2_sb, _ = _weights(x, w1, b1, w2, b2, k1_tiles, h_tiles, n_dim, lambda *a: None)
    for g in nl.affine_range(full):
        _ln_blocks(x, norm, w1_sb, b1T, w2_sb, b2_sb, out, [Span(g * group * BLOCK + i * BLOCK, BLOCK, limit)
                   for i in range(group)], k1_tiles, h_tiles, n_blocks)  # fmt: skip
    if rest:
        _ln_blocks(x, norm, w1_sb, b1T, w2_sb, b2_sb, out, rest, k1_tiles, h_tiles, n_blocks, ready)
    return out
