"""Direct allocation (``nki.compiler.sbuf.mod_alloc`` and friends, reference/nki.md §2.7 "Direct allocation"): the
kernel, not the allocator, says where each block of an on-chip tensor lives.

A tensor ``(B..., par_dim(P), F...)`` declared with ``buffer=`` one of these objects gets, per block index ``idx``
(row-major over the block dimensions; one block when there are none), a start partition and a byte address in
every partition. They are recorded on the IR's ``alloc`` as the ``address`` attribute, ``(partition, byte)`` per
block in row-major block order: the same attribute the current API's ``nl.ndarray(address=(p, b))`` writes for
its one block, so one mechanism serves both generations. The verifier checks the placements per target (rule
``direct-allocation``: inside the memory, alignment, no overlap with other placed tensors live at the same time,
no two blocks sharing space while both are in use) and the allocator (passes/allocate.py) honours them.

NKI refuses kernels that mix direct and automatic placement (implicit tiles such as ``t = nl.load(...)`` are
auto-allocated); here they may mix: the allocator places the automatic ones around the direct ones, so a kernel
NKI accepts runs unchanged and one it refuses for mixing runs too.

Blocks that share space by design (``num_free_tiles=(2,)``: block ``i`` lives where block ``i % 2`` does, a
double buffer) are separate storage on the NumPy reference and JAX (which compute values, not addresses); the
verifier's rule is what keeps a kernel from reading a block whose space a later block already took.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.language.buffers import MemoryKind
from nki_dsl.trace.builder import caller_loc

MAX_BLOCKS = 1 << 16  # a bound on the per-block table a tensor's alloc carries (IR text stays small)


@dataclass(frozen=True, eq=False)
class DirectAllocation(MemoryKind):
    """``buffer=`` value that places each block: ``place(idx, pdim_size, fdim_bytes) -> (partition, byte)`` with
    ``byte`` counted from the start of the partition (a PSUM bank ``k`` starts at ``k * bank bytes``)."""

    api: str = ""
    place: object = None

    def __repr__(self) -> str:
        return self.api

    def addresses(self, ty: TensorType) -> tuple[int, ...]:
        """The ``address`` attribute of a tensor of type ``ty``: ``(partition, byte)`` per block, flattened."""
        blocks = ty.block_shape
        if math.prod(blocks) > MAX_BLOCKS:
            raise NkiApiError(f"{self.api}: {math.prod(blocks)} blocks is more than the {MAX_BLOCKS} a directly "
                              f"allocated tensor may have", caller_loc(), self.api)  # fmt: skip
        fdim_bytes = dtypes.get(ty.dtype).itemsize * math.prod(ty.free_shape)
        out: list[int] = []
        for idx in itertools.product(*(range(b) for b in blocks)):
            part, byte = self.place(idx, ty.partitions, fdim_bytes)
            out += [part, byte]
        return tuple(out)


def check_int(api: str, name: str, value) -> int:
    try:
        n = int(value.__index__())
    except (AttributeError, TypeError):
        raise NkiApiError(f"{name}={value!r} must be an int", caller_loc(), api) from None
    if n < 0:
        raise NkiApiError(f"{name}={n} must be >= 0", caller_loc(), api)
    return n


def check_tiles(api: str, name: str, value) -> tuple[int, ...]:
    """A ``num_*_tiles`` tuple: positive ints, one per leading block dimension (missing ones count as 1)."""
    try:
        tiles = tuple(value)
    except TypeError:
        raise NkiApiError(f"{name}={value!r} must be a tuple of ints", caller_loc(), api) from None
    out = tuple(check_int(api, name, t) for t in tiles)
    if any(t == 0 for t in out):
        raise NkiApiError(f"{name}={value!r}: every entry must be >= 1", caller_loc(), api)
    return out


def mod_index(api: str, name: str, idx: tuple[int, ...], tiles: tuple[int, ...]) -> int:
    """``lin(idx mod tiles)``, row-major: which of the ``prod(tiles)`` slots block ``idx`` takes. ``tiles`` covers
    the leading block dimensions; the ones it leaves out count as 1 (every block there shares the slot)."""
    if len(tiles) > len(idx):
        raise NkiApiError(f"{name}={tiles} has {len(tiles)} entries but the tensor has {len(idx)} block "
                          f"dimension(s)", caller_loc(), api)  # fmt: skip
    lin = 0
    for i, t in zip(idx, tiles):
        lin = lin * t + i % t
    return lin


def from_function(api: str, buffer: Buffer, func, convert) -> DirectAllocation:
    """``alloc(func)``: ``func(idx, pdim_size, fdim_bytes)`` is called per block at trace time; ``convert`` turns
    its result into ``(partition, byte)`` (PSUM results name a bank)."""
    if not callable(func):
        raise NkiApiError(f"{api} takes a function (idx, pdim_size, fdim_bytes) -> address, got {func!r}",
                          caller_loc(), api)  # fmt: skip

    def place(idx, pdim, fdim_bytes):
        got = func(idx, pdim, fdim_bytes)
        return convert(got, idx)

    return DirectAllocation(buffer, api=f"{api}({getattr(func, '__name__', 'func')})", place=place)
