"""Turn a Python subscript (``t[ix, iy]``, ``t[k, :, 0:512]``, ``t[...]``) into an IR ``Access``.

Two indexing styles, never mixed in one subscript (as in NKI): basic (integers, loop indices, slices, ``nl.ds``,
``...``) keeps one axis per slice in order; advanced (``nl.arange``/``nl.mgrid`` expressions) gives the broadcast
shape of the index expressions. Scalars (ints, loop indices, program ids) may appear in either. Indexing a view
composes with the view's own index map.
"""

from __future__ import annotations

from nki_dsl.errors import NkiTraceError, SourceLoc
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access
from nki_dsl.trace.index import DynSlice, IndexValue, as_index, broadcast_shapes
from nki_dsl.trace.symbolic import InconclusiveDimensionError


def index_access(base: Access, key, loc: SourceLoc) -> Access:
    """The access ``base[key]``; ``base`` may itself be a view."""
    entries = _expand(key, len(base.shape), loc)
    advanced = [e for e in entries if isinstance(e, IndexValue) and e.shape]
    if advanced:
        exprs, shape = _advanced(entries, loc)
    else:
        exprs, shape = _basic(entries, base.shape, loc)
    return compose(base, exprs, shape)


def compose(base: Access, exprs: list[Affine], shape: tuple[int, ...]) -> Access:
    """Apply index ``exprs`` (over new axes ``d*``), one per axis of ``base``, through ``base``'s index map."""
    if base.is_full:
        return Access(base.tensor, tuple(exprs), tuple(shape))
    # Rename the new axes out of the way, substitute, rename back.
    tmp = {f"d{k}": f"d{k + 10_000}" for k in range(len(shape))}
    back = {v: k for k, v in tmp.items()}
    env = {f"d{j}": e.rename(tmp) for j, e in enumerate(exprs)}
    index = tuple(e.substitute(env).rename(back) for e in base.index)
    return Access(base.tensor, index, tuple(shape))


def _expand(key, ndim: int, loc: SourceLoc) -> list:
    key = list(key) if isinstance(key, tuple) else [key]
    if any(k is None for k in key):
        raise NkiTraceError("None (new axis) is not allowed when indexing a tensor", loc)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise NkiTraceError("an index can contain at most one '...'", loc)
    if n_ellipsis:
        pos = next(i for i, k in enumerate(key) if k is Ellipsis)
        key[pos : pos + 1] = [slice(None)] * (ndim - len(key) + 1)
    if len(key) > ndim:
        raise NkiTraceError(f"too many indices ({len(key)}) for a tensor of rank {ndim}", loc)
    return key + [slice(None)] * (ndim - len(key))


def _scalar(entry, loc: SourceLoc) -> Affine:
    idx = as_index(entry)
    if idx is NotImplemented:
        raise NkiTraceError(f"cannot index a tensor with {entry!r}", loc)
    return idx.expr


def _basic(entries, dims, loc) -> tuple[list[Affine], tuple[int, ...]]:
    exprs: list[Affine] = []
    shape: list[int] = []
    for entry, dim in zip(entries, dims):
        if isinstance(entry, DynSlice):
            start, extent, step = entry.start.expr, entry.size, 1
        elif isinstance(entry, slice):
            start, extent, step = _slice(entry, dim, loc)
        else:
            exprs.append(_scalar(entry, loc))
            continue
        exprs.append(start + Affine.var(f"d{len(shape)}", step))
        shape.append(extent)
    return exprs, tuple(shape)


def _slice(s: slice, dim: int | str, loc: SourceLoc) -> tuple[Affine, int, int]:
    step = 1 if s.step is None else s.step
    if isinstance(step, IndexValue) or not isinstance(step, int) or step <= 0:
        raise NkiTraceError(f"slice step must be a positive int, got {s.step!r}", loc)
    start = Affine() if s.start is None else _scalar(s.start, loc)
    if isinstance(dim, str):  # a shape family's symbolic dimension: only slices whose size it does not decide
        _symbolic_slice(s, start, dim, loc)
    stop = Affine((), dim) if s.stop is None else _scalar(s.stop, loc)
    if start.is_const and stop.is_const:
        start_c = start.const + dim if start.const < 0 else start.const
        stop_c = stop.const + dim if stop.const < 0 else stop.const
        start, stop = Affine((), start_c), Affine((), min(stop_c, dim) if s.stop is None else stop_c)
    width = stop - start
    if not width.is_const:
        raise NkiTraceError(
            f"slice {start}:{stop} has a size that depends on a loop index; use nl.ds(start, size)", loc
        )
    extent = max(0, -(-width.const // step))
    return start, extent, step


def _symbolic_slice(s: slice, start: Affine, dim: str, loc: SourceLoc) -> None:
    stop = None if s.stop is None else _scalar(s.stop, loc)
    if stop is None or (start.is_const and start.const < 0) or (stop.is_const and stop.const < 0):
        raise InconclusiveDimensionError(
            f"the slice {s.start}:{s.stop} of symbolic dimension {dim[1:]} needs its value (a tile has concrete "
            f"sizes): index it with tiles (nl.arange, nl.ds) and mask the ragged edge, or declare {dim[1:]} concrete",
            loc,
        )


def _advanced(entries, loc) -> tuple[list[Affine], tuple[int, ...]]:
    if len(entries) > 1 and any(isinstance(e, IndexValue) and e.ndim == 1 for e in entries):
        # NKI's err_1d_arange_not_supported (reference/nki.md §1.3): a tile index has a partition and a free axis.
        raise NkiTraceError(
            "indexing with a 1-D nl.arange is not supported: tile indices are at least 2-D, so give the index its "
            "axis, e.g. nl.arange(128)[:, None] for the partition dimension or nl.arange(512)[None, :] for a free "
            "one (or use nl.mgrid)",
            loc,
        )
    if any(isinstance(e, slice | DynSlice) for e in entries):
        raise NkiTraceError(
            "mixing basic indexing (slices) and advanced indexing (nl.arange / nl.mgrid) in one subscript is not "
            "supported; index every dimension with nl.arange, or every dimension with slices",
            loc,
        )
    values = [as_index(e) for e in entries]
    for e, v in zip(entries, values):
        if v is NotImplemented:
            raise NkiTraceError(f"cannot index a tensor with {e!r}", loc)
    shape = broadcast_shapes(*(v.shape for v in values))
    return [v.broadcast(shape) for v in values], shape
