"""Integer indexing in the current API (reference/nki.md §1.3 "New generation indexing", §2.7 "Access patterns &
views"): on an on-chip tensor an integer on the partition axis keeps that axis with size 1 (``t[0]`` is
``[1, F]``), and an integer on a free axis drops it unless the view would become less than 2-D. HBM tensors drop
integer-indexed axes, as legacy does. A negative integer counts from the end of its axis, on any tensor.
Installed (``current_key``) as ``trace.tensor.index_key_hook`` while a current-API kernel is traced: the key is
rewritten with ``nl.ds(i, 1)`` where an axis must stay, and an index into a view is checked against the view's
axes (``view_bounds.py``)."""

from __future__ import annotations

from nki_dsl.current import view_bounds
from nki_dsl.trace.index import DynSlice, IndexValue, ds
from nki_dsl.trace.tensor import TileView


def current_key(tile, key):
    """The key ``tile[key]`` means in the current API, checked to stay inside ``tile`` when it is a view."""
    key = keep_on_chip_axes(tile, key)
    if type(tile) is TileView:  # (offset and indirect views refuse indexing themselves)
        view_bounds.check(tile, key)
    return key


def _is_int(k) -> bool:
    return (isinstance(k, int) and not isinstance(k, bool)) or (isinstance(k, IndexValue) and not k.shape)


def keep_on_chip_axes(tile, key):
    items = list(key) if isinstance(key, tuple) else [key]
    ndim = len(tile.shape)
    if any(k is Ellipsis for k in items):
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (ndim - len(items) + 1)
    if len(items) > ndim or any(k is None for k in items):
        return key  # the legacy rules report it
    items += [slice(None)] * (ndim - len(items))
    if any(isinstance(k, IndexValue) and k.shape for k in items):
        return key  # advanced (nl.arange-style) indexing: not the current API's, left to the legacy rules
    items = [k + size if isinstance(k, int) and not isinstance(k, bool) and k < 0 else k
             for k, size in zip(items, tile.shape)]  # fmt: skip
    if not tile.access().tensor.type.buffer.on_chip:
        return tuple(items)
    if items and _is_int(items[0]):
        items[0] = ds(items[0], 1)
    kept = sum(1 for k in items if isinstance(k, slice | DynSlice))
    for j in range(1, len(items)):
        if kept >= 2:
            break
        if _is_int(items[j]):
            items[j] = ds(items[j], 1)
            kept += 1
    return tuple(items)
