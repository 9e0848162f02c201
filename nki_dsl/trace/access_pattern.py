"""``t.ap(pattern, offset=...)``: an access pattern over a tensor's storage (the current API's
``NkiTensor.ap``, reference/nki.md §2.7 "Access patterns & views").

``pattern`` is ``[[step, num], ...]``, outermost first: the view's shape is the ``num``s and element
``(i0, i1, ...)`` is ``flat[offset + sum(step_k * i_k)]`` of the tensor's row-major storage, in elements.

* HBM tensors: any pattern. The tensor is viewed as one flat axis (an ``hbm.reshape``), so the IR access is that
  affine expression exactly, and ``offset`` may be a loop index expression.
* On-chip tensors: the first pair walks the partitions, and its step must be the tensor's free-size (no
  partition striding); the other pairs address the free bytes of a 2-D ``[P, F]`` tensor. ``offset`` is an int.
  ``offset=None`` starts at the view's own origin (``t[:, 64:].ap(...)`` starts at column 64).

``scalar_offset=`` (a start a register moves at run time) is ``trace/runtime_offset.py``'s; ``vector_offset=`` (rows
picked by an SBUF tile: a gather or scatter) is ``trace/vector_offset.py``'s; the two together are refused.
``dtype=`` on an on-chip tensor walks its bits as that dtype: the pattern runs over the tensor's bit-cast view
(``trace/views.py``, made by ``NkiTensor.ap``); on HBM it is refused as views of HBM are.

``t.reshape(shape)`` (another view of the same storage, splitting and merging axes) is ``trace/reshape.py``'s.
"""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue, as_index

API = "ap"


def _pairs(pattern) -> list[tuple[int, int]]:
    try:
        pairs = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise NkiApiError(f"pattern={pattern!r} must be a list of [step, num] pairs", caller_loc(), API) from None
    if not pairs or any(num <= 0 for _, num in pairs):
        raise NkiApiError(f"pattern={pattern!r} needs at least one pair and positive sizes", caller_loc(), API)
    return pairs


def _origin(view: Access, shape: tuple[int, ...]) -> Affine:
    """The flat storage offset of a view's first element."""
    zero = {f"d{k}": Affine() for k in range(len(view.shape))}
    flat, stride = Affine(), 1
    for k in reversed(range(len(shape))):
        flat = flat + view.index[k].substitute(zero) * stride
        stride *= shape[k]
    return flat


def access_pattern(view: Access, flatten, pattern, offset=None, scalar_offset=None, vector_offset=None,
                   indirect_dim=0, dtype=None) -> Access:
    """The access ``pattern`` makes of the storage under ``view``; ``flatten(tensor)`` is a 1-D view of an HBM
    tensor (an ``hbm.reshape``, which only the tensor layer builds)."""
    if scalar_offset is not None or vector_offset is not None:  # (NkiTensor.ap takes each alone elsewhere)
        raise NkiApiError("scalar_offset= and vector_offset= do not combine (nor vector_offset= with dtype=)",
                          caller_loc(), API)  # fmt: skip
    if indirect_dim not in (0, None):
        raise NkiApiError(f"indirect_dim={indirect_dim!r} names the dimension a scalar_offset= or vector_offset= "
                          f"indexes; there is none", caller_loc(), API)  # fmt: skip
    if dtype is not None:
        raise NkiApiError("ap(dtype=...) reinterprets bytes, which is not modelled", caller_loc(), API)
    pairs = _pairs(pattern)
    tensor = view.tensor
    shape = tuple(tensor.type.shape)
    if offset is None:
        start = _origin(view, shape)
    else:
        idx = as_index(offset)
        if idx is NotImplemented or (isinstance(idx, IndexValue) and idx.shape):
            raise NkiApiError(f"offset={offset!r} must be an int or a scalar loop index", caller_loc(), API)
        start = idx.expr
    terms = [Affine.var(f"d{k}", step) for k, (step, _) in enumerate(pairs)]
    nums = tuple(num for _, num in pairs)
    if not tensor.type.buffer.on_chip:
        flat = flatten(tensor) if len(shape) != 1 else tensor
        expr = start
        for t in terms:
            expr = expr + t
        return Access(flat, (expr,), nums)
    return _on_chip(tensor, shape, pairs, start, terms, nums)


def _on_chip(tensor, shape, pairs, start: Affine, terms, nums):
    free = 1
    for s in shape[1:]:
        free *= s
    if pairs[0][0] != free:
        raise NkiApiError(f"on '{tensor.name}' {list(shape)} in {tensor.type.buffer.value} the first pair walks the "
                          f"partitions: its step must be the free size {free}, got {pairs[0][0]}",
                          caller_loc(), API)  # fmt: skip
    if len(shape) != 2:
        raise NkiApiError(f"ap on an on-chip tensor of rank {len(shape)} is not modelled; use a [P, F] tensor",
                          caller_loc(), API)  # fmt: skip
    if not start.is_const:
        raise NkiApiError("the offset of an on-chip access pattern must be an int", caller_loc(), API)
    p0, f0 = divmod(start.const, free)
    free_expr = Affine((), f0)
    for t in terms[1:]:
        free_expr = free_expr + t
    return Access(tensor, (Affine.var("d0") + p0, free_expr), nums)
