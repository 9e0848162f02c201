"""Memory kinds (``nl.sbuf``, ``nl.psum``, ``nl.hbm``, ...) and ``nl.par_dim``."""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.trace.symbolic import Dim


@dataclass(frozen=True)
class MemoryKind:
    buffer: Buffer

    def __repr__(self) -> str:
        return f"nl.{self.buffer.value}"


sbuf = MemoryKind(Buffer.SBUF)
psum = MemoryKind(Buffer.PSUM)
hbm = MemoryKind(Buffer.HBM)
private_hbm = MemoryKind(Buffer.PRIVATE_HBM)
shared_hbm = MemoryKind(Buffer.SHARED_HBM)


def to_buffer(buffer, default: Buffer = Buffer.SBUF) -> Buffer:
    """Accept ``nl.sbuf``, a ``Buffer`` or its name; ``None`` means the default (SBUF, as in NKI)."""
    if buffer is None:
        return default
    if isinstance(buffer, MemoryKind):
        return buffer.buffer
    if isinstance(buffer, Buffer):
        return buffer
    try:
        return Buffer(str(buffer))
    except ValueError:
        raise NkiApiError(
            f"buffer {buffer!r} is not one of nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm"
        ) from None


@dataclass(frozen=True)
class par_dim:  # noqa: N801 - the NKI spelling
    """Marks the partition dimension in an on-chip shape with leading block dimensions:
    ``nl.ndarray((K // 128, nl.par_dim(128), 512), dtype, buffer=nl.sbuf)``."""

    size: int


def split_shape(shape) -> tuple[tuple[int, ...], int]:
    """A shape that may contain one ``par_dim`` marker -> (plain shape, index of the partition dimension)."""
    if isinstance(shape, int):
        shape = (shape,)
    dims, par_axis = [], 0
    for k, s in enumerate(shape):
        if isinstance(s, par_dim):
            par_axis = k
            s = s.size
        if isinstance(s, Dim):  # a shape family's dimension: a symbol, for HBM tensors only (creation._type)
            dims.append(s.table.size(s.expr, "the tensor dimension"))
            continue
        try:
            dims.append(int(s.__index__()))
        except (AttributeError, TypeError):
            raise NkiApiError(f"shape entries must be ints, got {s!r} in {tuple(shape)!r}") from None
    if sum(isinstance(s, par_dim) for s in shape) > 1:
        raise NkiApiError(f"shape {shape!r} has more than one nl.par_dim")
    return tuple(dims), par_axis
