"""``data[idx_tile, i_f]``: an HBM tensor indexed with an on-chip integer tile, the address side of an indirect
DMA (``ir/indirect.py`` has the IR form). Only ``nl.load``, ``nl.store`` and ``nisa.dma_copy`` take such a view.

The tile gives one row per partition (shape ``[P, 1]`` or ``[P]``), so it indexes the first axis of the access
(the partition axis of the tile moved); the other entries index as usual, basic (ints, slices, ``nl.ds``) or
advanced (``nl.arange``), and the tile's entry becomes the placeholder ``d0`` of extent ``P``. A tile on a free
axis is refused as NKI refuses it (``err_indirect_indices_free_dim``, reference/nki.md §1.2).
"""

from __future__ import annotations

from nki_dsl.errors import NkiTraceError, SourceLoc
from nki_dsl.ir import indirect
from nki_dsl.ir.nodes import Access
from nki_dsl.trace.access import _advanced, _basic, _expand
from nki_dsl.trace.handle import TileHandle
from nki_dsl.trace.index import DynSlice, IndexValue, as_index

FREE_DIM = "err_indirect_indices_free_dim"


def has_tile(key) -> bool:
    entries = key if isinstance(key, tuple) else (key,)
    return any(isinstance(e, TileHandle) for e in entries)


def indirect_access(base: Access, key, loc: SourceLoc) -> tuple[Access, Access, int]:
    """``(HBM access with the placeholder, index tile access, indexed dimension)`` of ``base[key]``."""
    entries = _expand(key, len(base.shape), loc)
    at = [k for k, e in enumerate(entries) if isinstance(e, TileHandle)]
    if base.tensor.type.buffer.on_chip:
        raise NkiTraceError(f"'{base.tensor.name}' is in {base.tensor.type.buffer.value}: only HBM tensors can be "
                            f"indexed with a tile (an indirect DMA); index on-chip tiles with loop indices and "
                            f"nl.arange", loc)  # fmt: skip
    if len(at) > 1:
        raise NkiTraceError("only one dimension of an indirect DMA can be indexed with a tile", loc)
    if not base.is_full:
        raise NkiTraceError("index the HBM tensor itself with the tile (data[idx, i_f]), not a view of it", loc)
    k = at[0]
    tile = entries[k].access()
    rows = tile.shape[0]
    if any(s != 1 for s in tile.shape[1:]) or not tile.tensor.type.buffer.on_chip:
        raise NkiTraceError(f"an index tile holds one row number per partition: it must be an on-chip [P, 1] tile, "
                            f"got {tile.describe()}; a tile cannot index a free axis ({FREE_DIM})", loc)  # fmt: skip
    advanced = [e for j, e in enumerate(entries) if j != k and isinstance(e, IndexValue) and e.shape]
    if advanced:
        rank = max(2, *(len(e.shape) for e in advanced))
        entries[k] = IndexValue(indirect.PLACEHOLDER, (rows,) + (1,) * (rank - 1))
        exprs, shape = _advanced(entries, loc)
    else:
        if any(isinstance(e, slice | DynSlice) for e in entries[:k]):
            raise NkiTraceError(f"the index tile must index the first axis of the access (its partitions); a slice "
                                f"before it makes it a free axis ({FREE_DIM})", loc)  # fmt: skip
        entries[k] = DynSlice(as_index(0), rows)
        exprs, shape = _basic(entries, base.shape, loc)
    if exprs[k] != indirect.PLACEHOLDER or not shape or shape[0] != rows:
        raise NkiTraceError(f"the index tile must index the first axis of the access (its partitions), which has "
                            f"{rows} rows ({FREE_DIM})", loc)  # fmt: skip
    if any(indirect.PLACEHOLDER.vars() & e.vars() for j, e in enumerate(exprs) if j != k):
        raise NkiTraceError("no other index of an indirect DMA may vary along the index tile's partitions", loc)
    return Access(base.tensor, tuple(exprs), tuple(shape)), tile, k
