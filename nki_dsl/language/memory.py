"""Data movement: loads and stores between HBM and on-chip memory, copies, transposes and in-place writes."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Access
from nki_dsl.ir.types import TensorType
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.semantics import build_op
from nki_dsl.trace.tensor import NkiTensor


def load(src, *, mask=None, dtype=None):
    """HBM -> SBUF. The tile has the access's shape; ``dtype`` converts on the way (rounding to nearest)."""
    return build_op("nl.load", {"src": src}, dtype=dtype, mask=mask)


def store(dst, value, *, mask=None):
    """SBUF/PSUM -> HBM, converting to the destination's dtype."""
    build_op("nl.store", {"dst": dst, "value": value}, mask=mask)


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


def reshape(tensor: NkiTensor, shape):
    """A view of an HBM tensor with another shape and the same elements in row-major order."""
    shape = tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
    t = tensor.tensor.type
    if not t.buffer.on_chip:
        n_old = 1
        for s in t.shape:
            n_old *= s
        n_new = 1
        for s in shape:
            n_new *= s
        if n_old != n_new:
            raise NkiApiError(
                f"cannot reshape '{tensor.name}' {list(t.shape)} to {list(shape)}: {n_old} vs {n_new} elements",
                caller_loc(),
                "reshape",
            )
    rtype = TensorType(shape, dtypes.normalize(t.dtype), t.buffer)
    return build_op("hbm.reshape", {"x": tensor}, {"shape": shape}, result_type=rtype, hint=f"{tensor.name}_r")
