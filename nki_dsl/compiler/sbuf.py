"""``ncc.sbuf``: direct allocation in SBUF (reference/nki.md §2.7 "Direct allocation").

``alloc(func)``: ``func(idx, pdim_size, fdim_bytes) -> (start_partition, byte_addr)`` per block.
``mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=())``: block ``idx`` starts at
partition ``base_partition + lin(idx mod num_par_tiles) * pdim_size`` and byte ``base_addr + lin(idx mod
num_free_tiles) * fdim_bytes`` (``num_free_tiles=(2,)`` is a double buffer). ``auto_alloc()`` is ``nl.sbuf``.
"""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.language import buffers
from nki_dsl.language.direct_allocation import (
    DirectAllocation,
    check_int,
    check_tiles,
    from_function,
    mod_index,
)
from nki_dsl.trace.builder import caller_loc


def auto_alloc():
    return buffers.sbuf


def _pair(api: str):
    def convert(got, idx):
        try:
            part, byte = got
        except (TypeError, ValueError):
            raise NkiApiError(f"the function returned {got!r} for block {idx}; it must return "
                              f"(start_partition, byte_addr)", caller_loc(), api) from None  # fmt: skip
        return check_int(api, "start_partition", part), check_int(api, "byte_addr", byte)

    return convert


def alloc(func):
    return from_function("ncc.sbuf.alloc", Buffer.SBUF, func, _pair("ncc.sbuf.alloc"))


def mod_alloc(*, base_addr, base_partition=0, num_par_tiles=(), num_free_tiles=()):
    api = "ncc.sbuf.mod_alloc"
    base, part0 = check_int(api, "base_addr", base_addr), check_int(api, "base_partition", base_partition)
    par_tiles, free_tiles = check_tiles(api, "num_par_tiles", num_par_tiles), check_tiles(api, "num_free_tiles",
                                                                                           num_free_tiles)

    def place(idx, pdim, fdim_bytes):
        return (part0 + mod_index(api, "num_par_tiles", idx, par_tiles) * pdim,
                base + mod_index(api, "num_free_tiles", idx, free_tiles) * fdim_bytes)

    text = f"{api}(base_addr={base}" + (f", base_partition={part0}" if part0 else "") + (
        f", num_par_tiles={par_tiles}" if par_tiles else "") + (
        f", num_free_tiles={free_tiles}" if free_tiles else "") + ")"
    return DirectAllocation(Buffer.SBUF, api=text, place=place)
