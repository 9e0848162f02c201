"""``nl.ndarray(shape, dtype, buffer=nl.sbuf, name='', address=None)`` of the current API (reference/nki.md §2.7
"nki.language"): an uninitialised tensor. On-chip shapes have the partition axis first (``nl.par_dim`` and block
dimensions are gone).

``address=(partition_offset, free_offset_bytes)`` asks for a physical placement, recorded on the IR's ``alloc``
and honoured by the allocator (passes/allocate.py), which also checks it against the target (capacity, and no
two placed tensors overlapping while both are live: reported when the kernel is compiled for the simulator).
What needs no target is checked here, at the kernel line: the form, the partition range, a PSUM tensor starting
on a 2 KiB bank boundary, the start partition the partition count allows (reference/nki.md §1.2).

``buffer=`` is a buffer object (``nl.sbuf``, ``nl.psum``, ``nl.hbm``, ``nl.private_hbm``, ``nl.shared_hbm``): NKI 0.3.0
rejects string buffer names (reference/nki.md §2.6 "Language restrictions"), so a kernel that runs here also
compiles there. The legacy front end keeps accepting them.

An on-chip tensor with two or more free axes is stored as ``[P, prod(free)]`` and handed out as a view of that
storage in the shape asked for (``nl.ndarray((128, 4, 16), ...)`` is the ``[128, 4, 16]`` view of a ``[128, 64]``
tile): the bytes and every instruction's access are the same as a ``[128, 4, 16]`` tile's, and ``t.reshape`` can
then merge free axes (reference/nki.md §2.7 "Views": a reshape of compatible contiguity), which is affine only when
the merged axes lie on one storage axis (``trace/reshape.py``). Indexing such a view is checked against the view's
own axes at the kernel line (``nki_dsl/current/view_bounds.py``), since the storage's bounds alone would let
``t[:, 0, 16:20]`` run into the next row."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer
from nki_dsl.language import creation as legacy
from nki_dsl.language.buffers import par_dim, split_shape, to_buffer
from nki_dsl.trace import reshape
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import TileView, build_op

BUFFER_NAMES = ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm")


def _buffer(api: str, buffer):
    if isinstance(buffer, str):
        meant = f" (nl.{buffer})" if buffer in BUFFER_NAMES else ""
        raise NkiApiError(f"buffer={buffer!r}: the current API takes a buffer object{meant}, not a name (NKI 0.3.0 "
                          f"rejects string buffer names)", caller_loc(), api)  # fmt: skip
    return buffer


def ndarray(shape, dtype, buffer=None, name="", address=None):
    buffer = _buffer("nl.ndarray", buffer)
    if isinstance(shape, int):
        shape = (shape,)
    if any(isinstance(s, par_dim) for s in shape):
        raise NkiApiError("nl.par_dim was removed in the current API: put the partition axis first",
                          caller_loc(), "nl.ndarray")  # fmt: skip
    stored = _storage(shape, buffer)
    if address is None:
        return _viewed(legacy.ndarray(stored, dtype, buffer=buffer, name=name), shape)
    placed = _check_address(shape, to_buffer(buffer), address)
    tile = build_op("alloc", {}, {"address": placed}, result_type=legacy._type(stored, dtype, buffer), hint=name)
    return _viewed(tile, shape)


def _storage(shape, buffer):
    """The shape an on-chip tensor of ``shape`` is stored in: ``[P, prod(free)]`` (module docstring)."""
    dims, _ = split_shape(shape)
    if len(dims) < 3 or not to_buffer(buffer).on_chip:
        return shape
    free = 1
    for s in dims[1:]:
        free *= s
    return (dims[0], free)


def _viewed(tile, shape):
    """``tile`` (stored as ``_storage(shape)``) as the view of shape ``shape``."""
    if not tile.access().tensor.type.buffer.on_chip:
        return tile
    dims, _ = split_shape(shape)
    if tuple(tile.shape) == dims:
        return tile
    return TileView(reshape.on_chip(tile.access(), dims))


def _check_address(shape, buffer: Buffer, address) -> tuple[int, int]:
    """PSUM allocations start on a bank boundary (reference/nki.md §1.1); the partition count and bank size are
    the target's (recorded as facts of the trace)."""
    api = "nl.ndarray"
    builder = current(api)
    partitions, bank = builder.target_fact("partitions"), builder.target_fact("psum_bank_bytes")
    try:
        partition, offset = (int(a.__index__()) for a in address)
    except (AttributeError, TypeError, ValueError):
        raise NkiApiError(f"address={address!r} must be (partition_offset, free_offset_bytes)", caller_loc(),
                          api) from None  # fmt: skip
    if not buffer.on_chip:
        raise NkiApiError(f"address= places SBUF/PSUM tensors; this one is in {buffer.value}", caller_loc(), api)
    if partition < 0 or offset < 0 or partition + int(shape[0]) > partitions:
        raise NkiApiError(f"address={address!r} places partitions {partition}..{partition + int(shape[0]) - 1}, "
                          f"outside 0..{partitions - 1}", caller_loc(), api)  # fmt: skip
    if buffer == Buffer.PSUM and offset % bank:
        raise NkiApiError(f"a PSUM tensor must start at a bank boundary (a multiple of {bank} bytes); "
                          f"address free offset {offset} is not", caller_loc(), api)  # fmt: skip
    from nki_dsl.passes.allocate import start_step  # deferred: import nki_dsl does not load the passes

    step = start_step(int(shape[0]), partitions)
    if partition % step:
        raise NkiApiError(f"a {shape[0]}-partition tensor starts at a multiple of {step} partitions, not at "
                          f"{partition}", caller_loc(), api)  # fmt: skip
    return (partition, offset)


def zeros(shape, dtype, buffer=None, name=""):
    return _full(shape, 0.0, dtype, _buffer("nl.zeros", buffer), name)


def ones(shape, dtype, buffer=None, name=""):
    return _full(shape, 1.0, dtype, _buffer("nl.ones", buffer), name)


def full(shape, fill_value, dtype, buffer=None, name=""):
    return _full(shape, fill_value, dtype, _buffer("nl.full", buffer), name)


def _full(shape, fill_value, dtype, buffer, name):
    return _viewed(legacy.full(_storage(shape, buffer), fill_value, dtype, buffer=buffer, name=name), shape)


def zeros_like(a, dtype=None, buffer=None, name=""):
    shape, dt, buf = legacy._like(a, dtype, _buffer("nl.zeros_like", buffer))
    return _full(shape, 0.0, dt, buf, name)


def empty_like(a, dtype=None, buffer=None, name=""):
    shape, dt, buf = legacy._like(a, dtype, _buffer("nl.empty_like", buffer))
    return _viewed(legacy.ndarray(_storage(shape, buf), dt, buffer=buf, name=name), shape)
