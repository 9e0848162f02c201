"""``nl.ndarray(shape, dtype, buffer=nl.sbuf, name='', address=None)`` of the current API (reference/nki.md §2.7
"nki.language"): an uninitialised tensor. On-chip shapes have the partition axis first (``nl.par_dim`` and block
dimensions are gone).

``address=(partition_offset, free_offset_bytes)`` asks for a physical placement. It is checked here (a PSUM
tensor must start on a 2 KiB bank boundary, the partition range must fit, offsets are non-negative ints) but the
allocator does not yet take placements from kernels: the tensor is placed by the allocator like any other, and
the call says so with a warning, so numbers are unaffected and timing may differ from a hand placement."""

from __future__ import annotations

import warnings

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.language import creation as legacy
from nki_dsl.language.buffers import par_dim, to_buffer
from nki_dsl.trace.builder import caller_loc

PSUM_BANK_BYTES = 2048  # reference/nki.md §1.1: PSUM allocations start at a 2 KiB bank boundary
PARTITIONS = 128  # §1.2 TC#1


def ndarray(shape, dtype, buffer=None, name="", address=None):
    if isinstance(shape, int):
        shape = (shape,)
    if any(isinstance(s, par_dim) for s in shape):
        raise NkiApiError("nl.par_dim was removed in the current API: put the partition axis first",
                          caller_loc(), "nl.ndarray")  # fmt: skip
    if address is not None:
        _check_address(shape, to_buffer(buffer), address)
    return legacy.ndarray(shape, dtype, buffer=buffer, name=name)


def _check_address(shape, buffer: Buffer, address) -> None:
    api = "nl.ndarray"
    try:
        partition, offset = (int(a.__index__()) for a in address)
    except (AttributeError, TypeError, ValueError):
        raise NkiApiError(f"address={address!r} must be (partition_offset, free_offset_bytes)", caller_loc(),
                          api) from None  # fmt: skip
    if not buffer.on_chip:
        raise NkiApiError(f"address= places SBUF/PSUM tensors; this one is in {buffer.value}", caller_loc(), api)
    if partition < 0 or offset < 0 or partition + int(shape[0]) > PARTITIONS:
        raise NkiApiError(f"address={address!r} places partitions {partition}..{partition + int(shape[0]) - 1}, "
                          f"outside 0..{PARTITIONS - 1}", caller_loc(), api)  # fmt: skip
    if buffer == Buffer.PSUM and offset % PSUM_BANK_BYTES:
        raise NkiApiError(f"a PSUM tensor must start at a bank boundary (a multiple of {PSUM_BANK_BYTES} bytes); "
                          f"address free offset {offset} is not", caller_loc(), api)  # fmt: skip
    warnings.warn(f"{caller_loc()}: nl.ndarray address={tuple(address)} is checked but not honoured: the "
                  f"allocator places this tensor", stacklevel=3)  # fmt: skip


def zeros(shape, dtype, buffer=None, name=""):
    return legacy.zeros(shape, dtype, buffer=buffer, name=name)


def ones(shape, dtype, buffer=None, name=""):
    return legacy.ones(shape, dtype, buffer=buffer, name=name)


def full(shape, fill_value, dtype, buffer=None, name=""):
    return legacy.full(shape, fill_value, dtype, buffer=buffer, name=name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    return legacy.zeros_like(a, dtype, buffer=buffer, name=name)


def empty_like(a, dtype=None, buffer=None, name=""):
    return legacy.empty_like(a, dtype, buffer=buffer, name=name)
