"""Token blocks of the fused kernels (``fused_mlp``, ``qkv_split``) whose size is a Python int, or a shape family's
symbolic count (``nki.spec(dims=)``: the rows of x are a symbol), and how a launch's rows split into them.

A block of a concrete size is cut into exact 128-token tiles, as before shape families existed (so a concrete
trace's IR does not change). A block of a symbolic size cannot be: an ``nl.arange`` or an on-chip shape needs a
concrete extent. It is cut into whole 128-token tiles, as many as the family's ranges fix (``ceil(M / 128)`` is 2
for every M in 129..256) or, where they do not, a whole block's; every instruction touching the block is masked
to the rows below its size. (The simulator prices a masked instruction at the mask's bounding box and drops one
whose mask is empty, reference/nki.md §1.3, so a tile past the family's last row costs nothing.)
"""

import math

from .kernel import PMAX, _chunks, _static

BLOCK = 512  # tokens per block: the fused kernels' moving width (one PSUM bank of fp32, reference/nki.md §1.2)


class Span:
    """Tokens ``t0 .. t0 + size - 1`` (``t0`` may be a loop index or an expression over symbols), and with
    ``limit`` only those below row ``limit`` (a block of a loop whose last iterations may reach past the last row).
    ``tiles``: ``(s0, ss)`` of its 128-token tiles, relative to ``t0``; ``width``: their extent (a static int);
    ``valid(i)``: the mask ``i < size`` (``t0 + i < limit``) for an index ``i`` relative to ``t0``, or None when the
    size is concrete and there is no limit."""

    def __init__(self, t0, size, limit=None):
        concrete = _static(size)
        self.t0, self.limit = t0, limit
        self.size = size if concrete is None else concrete
        self.exact = concrete is not None and limit is None
        if concrete is not None:
            self.tiles = _chunks(concrete, PMAX)
            self.width = concrete
        else:
            count = _static(math.ceil(size / PMAX))
            self.width = (BLOCK // PMAX if count is None else count) * PMAX
            self.tiles = _chunks(self.width, PMAX)

    def valid(self, index):
        if self.limit is not None:
            return self.t0 + index < self.limit
        return None if self.exact else index < self.size


def split(m_rows):
    """The token blocks of ``m_rows`` rows, ``(first, count, tail)``: the first block, then ``count`` whole blocks
    after it (an affine loop's trip count, block ``i`` at ``(i + 1) * BLOCK``), then the ragged tail (or None).

    Concrete: the first block is ``min(BLOCK, M)`` tokens and the tail the ``M % BLOCK`` after the whole blocks. A
    shape family: ``ceil(M / BLOCK)`` blocks, of which the last, masked, holds 1..512 tokens (a concrete trace's
    tail or last whole block); the family's range must fix whether there is more than one block (``M <= 512`` or
    ``M > 512`` everywhere: the kernel decides on it), else the comparison names the dimension."""
    if _static(m_rows) is not None:
        n_full = m_rows // BLOCK
        tail = Span(n_full * BLOCK, m_rows % BLOCK) if n_full >= 1 and m_rows % BLOCK else None
        return Span(0, min(BLOCK, m_rows)), n_full - min(1, n_full), tail
    blocks = math.ceil(m_rows / BLOCK)
    if blocks == 1:
        return Span(0, m_rows), 0, None
    last = (blocks - 1) * BLOCK
    return Span(0, BLOCK), blocks - 2, Span(last, m_rows - last)


def pipeline(m_rows, group, group_concrete=True):
    """How a LayerNorm kernel pipelines the token blocks of ``m_rows`` rows (``fused_mlp._ln_blocks``: one block
    ahead within a run of blocks), ``(runs, limit, rest)``: ``runs`` runs of ``group`` blocks (an affine loop's
    trip count; run ``g`` starts at block ``g * group``), their blocks masked to the rows below ``limit`` unless it
    is None, then ``rest``, the Spans of one more run, in static code.

    Concrete: runs of ``group`` whole blocks when there are more than ``group`` blocks (with ``group_concrete``;
    else none), the rest as one static run. A shape family whose ranges fix the block count ``ceil(M / 512)`` at
    ``group`` or fewer: the same static run, its last block masked. Any other family: ``ceil(M / (group * 512))``
    runs, every block masked to the rows below M: the last run holds the last row, and its blocks past it are
    switched off whole (a masked instruction whose mask is empty does nothing and costs nothing, §1.3), so no
    static code depends on how many blocks the last run has."""
    if _static(m_rows) is not None:
        spans = [Span(t0, size) for t0, size in _chunks(m_rows, BLOCK)]
        full = len(spans) // group if group_concrete and len(spans) > group else 0
        return full, None, spans[full * group:]
    blocks = math.ceil(m_rows / BLOCK)
    count = _static(blocks)
    if count is not None and count <= group:
        last = (count - 1) * BLOCK
        return 0, None, [Span(i * BLOCK, BLOCK) for i in range(count - 1)] + [Span(last, m_rows - last)]
    return math.ceil(m_rows / (group * BLOCK)), m_rows, []
