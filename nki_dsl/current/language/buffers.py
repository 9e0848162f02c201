"""``nl.is_psum`` / ``is_sbuf`` / ``is_hbm`` / ``is_on_chip`` (reference/nki.md §2.6): predicates on a buffer
(``nl.psum``) or on a tensor's buffer, for kernels that branch on where an argument lives."""

from __future__ import annotations

from nki_dsl.ir.types import Buffer
from nki_dsl.language.buffers import to_buffer
from nki_dsl.trace.tensor import is_tile


def _buffer(x) -> Buffer:
    return x.access().tensor.type.buffer if is_tile(x) else to_buffer(x)


def is_psum(x) -> bool:
    return _buffer(x) == Buffer.PSUM


def is_sbuf(x) -> bool:
    return _buffer(x) == Buffer.SBUF


def is_hbm(x) -> bool:
    return not _buffer(x).on_chip


def is_on_chip(x) -> bool:
    return _buffer(x).on_chip
