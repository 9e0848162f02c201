"""``nisa.nc_stream_shuffle``, legacy form (reference/nki.md §2.3: ``nc_stream_shuffle(src, dst, shuffle_mask,
...)``, "shuffle within 32-partition quadrants; 255 = keep"): in every quadrant of 32 partitions, partition ``i``
of ``dst`` receives partition ``shuffle_mask[i]`` of the same quadrant of ``src``.

The project has no cross-partition Vector-engine move, so the shuffle is composed of one partition-to-partition
DMA per moved partition (SBUF to SBUF): the values are the instruction's, the modelled timing is the DMAs', not
the §2.3 ``max(MIN_II, N)``. PSUM operands are refused (a DMA does not reach PSUM here).
"""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.isa.dma import dma_copy
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import is_tile

QUADRANT = 32  # partitions a shuffle mask covers; the mask repeats over the tile's quadrants
KEEP = 255  # a mask entry leaving the destination partition as it is


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None):
    """``dst[q + i] = src[q + shuffle_mask[i]]`` for every quadrant start ``q`` and ``i < 32`` whose entry is not
    255. Returns None (``dst`` is written)."""
    api = "nisa.nc_stream_shuffle"
    entries = [int(m) for m in shuffle_mask]
    if len(entries) != QUADRANT or any(not (0 <= m < QUADRANT or m == KEEP) for m in entries):
        raise NkiApiError(f"shuffle_mask has {QUADRANT} entries, each a partition 0..{QUADRANT - 1} of the quadrant "
                          f"or {KEEP}, got {entries}", caller_loc(), api)  # fmt: skip
    for name, tile in (("src", src), ("dst", dst)):
        if not is_tile(tile):
            raise NkiApiError(f"'{name}' must be an SBUF tile, got {type(tile).__name__}", caller_loc(), api)
        if tile.access().tensor.type.buffer is not Buffer.SBUF:
            raise NkiApiError(f"'{name}' is in {tile.access().tensor.type.buffer.value}; the shuffle is composed "
                              f"of SBUF-to-SBUF DMAs here, so both tiles are in SBUF", caller_loc(), api)  # fmt: skip
    if tuple(src.shape) != tuple(dst.shape):
        raise NkiApiError(f"'src' {list(src.shape)} and 'dst' {list(dst.shape)} differ in shape", caller_loc(), api)
    if mask is not None:
        raise NkiApiError("mask= is not supported on the composed shuffle; shuffle a smaller tile", caller_loc(), api)
    for i in range(dst.shape[0]):
        m = entries[i % QUADRANT]
        if m != KEEP:
            p = i // QUADRANT * QUADRANT + m
            dma_copy(dst=dst[i:i + 1], src=src[p:p + 1])
