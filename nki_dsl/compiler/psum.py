"""``ncc.psum``: direct allocation in PSUM (reference/nki.md §2.7 "Direct allocation").

``alloc(func)``: ``func(idx, pdim_size, fdim_bytes) -> (bank_id, start_partition, byte_addr)`` per block.
``mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(), num_free_tiles=())``:
block ``idx`` is in bank ``base_bank + lin(idx mod num_bank_tiles)``, at byte ``base_addr + lin(idx mod
num_free_tiles) * fdim_bytes`` of that bank, from partition ``base_partition + lin(idx mod num_par_tiles) *
pdim_size``. ``auto_alloc()`` is ``nl.psum``. Bank ``k`` starts at byte ``k * bank bytes`` of a partition's PSUM
(2 KiB, §1.1); the bank count and size are the target's, checked by the verifier.
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
from nki_dsl.trace.builder import caller_loc, current


def _bank_bytes(api: str) -> int:
    # a target fact (2 KiB on every target, §1.1), recorded so a trace is reused only where it is the same
    return current(api).target_fact("psum_bank_bytes")


def auto_alloc():
    return buffers.psum


def alloc(func):
    api = "ncc.psum.alloc"

    def convert(got, idx):
        try:
            bank, part, byte = got
        except (TypeError, ValueError):
            raise NkiApiError(f"the function returned {got!r} for block {idx}; it must return "
                              f"(bank_id, start_partition, byte_addr)", caller_loc(), api) from None  # fmt: skip
        bank, part, byte = (check_int(api, n, v) for n, v in (("bank_id", bank), ("start_partition", part),
                                                              ("byte_addr", byte)))  # fmt: skip
        return part, bank * _bank_bytes(api) + byte

    return from_function(api, Buffer.PSUM, func, convert)


def mod_alloc(*, base_bank, base_addr=0, base_partition=0, num_bank_tiles=(), num_par_tiles=(), num_free_tiles=()):
    api = "ncc.psum.mod_alloc"
    bank0, base = check_int(api, "base_bank", base_bank), check_int(api, "base_addr", base_addr)
    part0 = check_int(api, "base_partition", base_partition)
    bank_tiles, par_tiles, free_tiles = (check_tiles(api, n, v) for n, v in (
        ("num_bank_tiles", num_bank_tiles), ("num_par_tiles", num_par_tiles), ("num_free_tiles", num_free_tiles)))

    def place(idx, pdim, fdim_bytes):
        bank = bank0 + mod_index(api, "num_bank_tiles", idx, bank_tiles)
        return (part0 + mod_index(api, "num_par_tiles", idx, par_tiles) * pdim,
                bank * _bank_bytes(api) + base + mod_index(api, "num_free_tiles", idx, free_tiles) * fdim_bytes)

    text = f"{api}(base_bank={bank0}" + (f", base_addr={base}" if base else "") + (
        f", num_bank_tiles={bank_tiles}" if bank_tiles else "") + (
        f", num_free_tiles={free_tiles}" if free_tiles else "") + ")"
    return DirectAllocation(Buffer.PSUM, api=text, place=place)
