"""Legacy ``nisa`` instructions the reference lists (reference/nki.md §2.3) that this front end does not compute:
each is a function that raises ``NkiApiError`` naming why and what to use, so a kernel calling one fails at its
line with a reason instead of an AttributeError.

* ``max8``, ``nc_find_index8``, ``range_select``, ``select_reduce``: the current API (``nki.isa`` of NKI 0.6,
  ``nki_dsl.current``) composes them; this front end does not (it may not import the current API's layer).
* ``nc_match_replace8``, ``sequence_bounds``, ``local_gather``: no semantics modelled (their in-partition search,
  segment and gather rules are not implemented by any backend here).
* ``tensor_copy_dynamic_src`` / ``tensor_copy_dynamic_dst``: offsets read from a register at run time; this
  project's offsets are affine in loop indices (index the tile with ``nl.ds(i * n, n)`` inside the loop).
* ``builtin_custom_op``: runs custom GpSimd C++ code, which cannot run here.
"""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc

_CURRENT = ("is composed by the current API (nki.isa of NKI 0.6, destination-passing: nki_dsl.current), not by "
            "this legacy front end; write the kernel against the current API to use it")  # fmt: skip
REASONS = {
    "max8": _CURRENT,
    "nc_find_index8": _CURRENT,
    "range_select": _CURRENT,
    "select_reduce": _CURRENT,
    "nc_match_replace8": "is not modelled: no backend here implements its find-and-replace of 8 values",
    "sequence_bounds": "is not modelled: no backend here implements its segment-bounds search",
    "local_gather": ("is not modelled: no instruction here gathers within partitions; gather rows from HBM with an "
                     "indirect DMA (nl.load(data[idx_tile, i_f]))"),  # fmt: skip
    "tensor_copy_dynamic_src": ("is not modelled: its offset is read from a register at run time; offsets here are "
                                "affine in loop indices (index the source with nl.ds(i * n, n) in the loop)"),
    "tensor_copy_dynamic_dst": ("is not modelled: its offset is read from a register at run time; offsets here are "
                                "affine in loop indices (index the destination with nl.ds(i * n, n) in the loop)"),
    "builtin_custom_op": "runs custom GpSimd C++ code, which cannot run here",
}  # fmt: skip


def _refusal(name: str):
    def refuse(*args, **kwargs):
        raise NkiApiError(f"{name} {REASONS[name]}", caller_loc(), f"nisa.{name}")

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Refused: nisa.{name} {REASONS[name]}."
    return refuse


max8 = _refusal("max8")
nc_find_index8 = _refusal("nc_find_index8")
range_select = _refusal("range_select")
select_reduce = _refusal("select_reduce")
nc_match_replace8 = _refusal("nc_match_replace8")
sequence_bounds = _refusal("sequence_bounds")
local_gather = _refusal("local_gather")
tensor_copy_dynamic_src = _refusal("tensor_copy_dynamic_src")
tensor_copy_dynamic_dst = _refusal("tensor_copy_dynamic_dst")
builtin_custom_op = _refusal("builtin_custom_op")
