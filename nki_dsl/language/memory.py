"""Data movement: loads and stores between HBM and on-chip memory, copies, transposes and in-place writes."""

from __future__ import annotations

from nki_dsl.ir.nodes import Access
from nki_dsl.trace.tensor import build_op, indirect_operands


def load(src, *, mask=None, dtype=None):
    """HBM -> SBUF. The tile has the access's shape; ``dtype`` converts on the way (rounding to nearest).
    ``src=data[idx_tile, i_f]`` gathers the rows an on-chip int32 tile names (an indirect DMA, ir/indirect.py)."""
    got = indirect_operands(src)
    if got is None:
        return build_op("nl.load", {"src": src}, dtype=dtype, mask=mask)
    access, extra = got
    indices = extra.pop("indices")
    return build_op("nl.load", {"src": access, "indices": indices}, extra, dtype=dtype, mask=mask)


def store(dst, value, *, mask=None):
    """SBUF/PSUM -> HBM, converting to the destination's dtype. ``dst=data[idx_tile, i_f]`` scatters the tile's
    partitions to the rows an on-chip int32 tile names (an indirect DMA)."""
    got = indirect_operands(dst)
    if got is None:
        build_op("nl.store", {"dst": dst, "value": value}, mask=mask)
        return
    access, extra = got
    indices = extra.pop("indices")
    build_op("nl.store", {"dst": access, "value": value, "indices": indices}, extra, mask=mask)


def load_transpose2d(src, *, mask=None, dtype=None):
    """HBM -> SBUF with the two dimensions swapped (a DMA transpose)."""
    return build_op("nl.load_transpose2d", {"src": src}, dtype=dtype, mask=mask)


def copy(src, *, mask=None, dtype=None):
    """A new SBUF tile with the values of ``src`` (from SBUF or PSUM)."""
    return build_op("nl.copy", {"x": src}, dtype=dtype, mask=mask)


# NKI code passes ``nl.copy`` as the identity activation (``nisa.activation(op=nl.copy, ...)``).
copy.__nki_function__ = "copy"


def transpose(x, *, dtype=None, mask=None):
    """The 2-D transpose of a tile (at most 128x128, as the Tensor engine does it)."""
    return build_op("nl.transpose", {"x": x}, dtype=dtype, mask=mask)


def broadcast_to(src, *, shape):
    """``src`` repeated along its size-1 dimensions to ``shape``."""
    return build_op("nl.broadcast_to", {"x": src}, {"shape": tuple(int(s) for s in shape)})


def expand_dims(data, axis):
    """``data`` with a size-1 dimension inserted at ``axis`` (an int or a tuple of ints)."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    return build_op("nl.expand_dims", {"x": data}, {"axis": axis})


def assign(target: Access, value, accumulate: str = "none", mask=None) -> None:
    """``t[...] = value`` (or ``+=`` with ``accumulate="add"``): write into an existing tensor."""
    build_op("assign", {"dst": target, "src": value}, {"accumulate": accumulate}, mask=mask)
