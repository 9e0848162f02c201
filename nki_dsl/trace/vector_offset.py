"""``hbm.ap(pattern, vector_offset=idx, indirect_dim=0)``: an access pattern whose partition ``w`` starts at row
``idx[w]`` of the HBM tensor (reference/nki.md §2.7 "Access patterns & views" and dma_copy: "Gather:
``src=hbm.ap(pattern, vector_offset=idx(P,1) u/int32 SBUF, indirect_dim=0)``; scatter: same on ``dst``").

It is the indirect DMA of issue 11 (``ir/indirect.py``) spelled as a pattern, and becomes the same IR: the HBM
tensor viewed as ``[rows, row elements]`` (an ``hbm.reshape`` when it has more than two dimensions), the row index
the placeholder ``d0`` that the index tile replaces when the DMA runs (each index checked against the rows then,
``oob_mode=error``), and the other pairs ``[[step, num], ...]`` addressing elements inside the row from
``offset``. Element ``(w, i1, ...)`` is ``flat[offset + idx[w] * row + sum(step_k * i_k)]``; the first pair's
``num`` is the partition count and its step is the base tensor's row stride, whatever it says ("leading stride from
the base tensor", §2.7). A pattern whose elements would leave the row is refused (the next row belongs to another
index); so is ``indirect_dim`` other than 0, as in NKI."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import indirect
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access
from nki_dsl.trace.builder import caller_loc

API = "ap"
INDEX_DTYPES = ("int32", "uint32")  # §2.7 dma_copy: vector_offset is "(P,1) u/int32 SBUF"


def indirect_pattern(view: Access, as_rows, pattern, offset, vector_offset, indirect_dim, pairs_of):
    """``(HBM access with the placeholder row, index tile access, 0)`` for ``IndirectView``. ``as_rows(tensor,
    rows, row)`` views an HBM tensor as ``[rows, row]``; ``pairs_of`` reads ``pattern``."""
    tensor = view.tensor
    if tensor.type.buffer.on_chip:
        raise NkiApiError(f"vector_offset gathers or scatters rows of an HBM tensor; '{tensor.name}' is in "
                          f"{tensor.type.buffer.value}", caller_loc(), API)  # fmt: skip
    if indirect_dim not in (0, None):
        raise NkiApiError(f"indirect_dim={indirect_dim!r}: a vector offset indexes dimension 0 (§2.7)", caller_loc(),
                          API)  # fmt: skip
    idx = _index_tile(vector_offset)
    pairs = pairs_of(pattern)
    rows, row = tensor.type.shape[0], 1
    for s in tensor.type.shape[1:]:
        row *= s
    nums = tuple(num for _, num in pairs)
    if nums[0] != idx.shape[0]:
        raise NkiApiError(f"the pattern's first pair spans {nums[0]} partitions and vector_offset holds "
                          f"{idx.shape[0]} row indices: one per partition", caller_loc(), API)  # fmt: skip
    start = _start(view, offset, row)
    col = Affine((), start)
    lo = hi = start
    for k, (step, num) in enumerate(pairs[1:], start=1):
        col = col + Affine.var(f"d{k}", step)
        lo, hi = lo + min(0, step * (num - 1)), hi + max(0, step * (num - 1))
    if lo < 0 or hi >= row:
        raise NkiApiError(f"the pattern reads elements {lo}..{hi} from the start of each row, outside the "
                          f"{row} elements of a row of '{tensor.name}' {list(tensor.type.shape)}", caller_loc(),
                          API)  # fmt: skip
    base = tensor if len(tensor.type.shape) == 2 else as_rows(tensor, rows, row)
    return Access(base, (indirect.PLACEHOLDER, col), nums), idx, 0


def _index_tile(vector_offset) -> Access:
    access = getattr(vector_offset, "access", None)
    if access is None:
        raise NkiApiError(f"vector_offset={vector_offset!r} must be an SBUF [P, 1] tile of row indices", caller_loc(),
                          API)  # fmt: skip
    a = access()
    dt = a.tensor.type.dtype
    if not a.tensor.type.buffer.on_chip or len(a.shape) != 2 or a.shape[1] != 1 or dt not in INDEX_DTYPES:
        raise NkiApiError(f"vector_offset must be an SBUF [P, 1] tile of {' or '.join(INDEX_DTYPES)} row indices, "
                          f"got {a.describe()} ({dtypes.get(dt).name})", caller_loc(), API)  # fmt: skip
    return a


def _start(view: Access, offset, row: int) -> int:
    """The element of each row the pattern starts at: ``offset``, or the view's own first element."""
    if offset is None:
        zero = {f"d{k}": Affine() for k in range(len(view.shape))}
        flat, stride = Affine(), 1
        for k in reversed(range(len(view.tensor.type.shape))):
            flat = flat + view.index[k].substitute(zero) * stride
            stride *= view.tensor.type.shape[k]
        if not flat.is_const or flat.const >= row:
            raise NkiApiError("with vector_offset the view must start in the first row (the index tile picks the "
                              "rows); pass offset=", caller_loc(), API)  # fmt: skip
        return flat.const
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise NkiApiError(f"offset={offset!r} must be a non-negative int with vector_offset", caller_loc(), API)
    return offset
