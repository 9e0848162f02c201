"""Tensor creation: ``ndarray``, ``zeros``, ``ones``, ``full`` and the ``*_like`` forms.

``lazy_initialization=`` (legacy ``neuronxcc.nki`` kernels pass it to ``nl.full``/``nl.zeros``) is accepted by
every creation function. NKI does not document it (reference/nki.md, "Legacy items": absent from docs and stubs,
only ``**kwargs``); its name says the compiler may defer or skip the fill when every element is written before
it is read. Filling anyway is the one behaviour that is right whatever the flag means: a kernel that writes every
element first cannot tell the difference, and one that does not reads the fill value instead of garbage. So the
flag is checked (a bool) and the tensor is always initialised as without it.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.language.buffers import split_shape, to_buffer
from nki_dsl.language.direct_allocation import DirectAllocation
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.symbolic import InconclusiveDimensionError
from nki_dsl.trace.tensor import build_op


def _type(shape, dtype, buffer) -> TensorType:
    dims, par_axis = split_shape(shape)
    t = TensorType(dims, dtypes.normalize(dtype), to_buffer(buffer), par_axis)
    symbols = [s[1:] for s in dims if isinstance(s, str)]
    if symbols and t.buffer.on_chip:  # on-chip memory is allocated at compile time: its sizes are concrete
        raise InconclusiveDimensionError(
            f"an {t.buffer.value} tensor of shape [{', '.join(map(str, shape))}] needs a concrete size for "
            f"dimension {', '.join(symbols)}; on-chip tensors are tiles of fixed size (loop over tiles and mask the "
            f"ragged edge), or declare {', '.join(symbols)} concrete", caller_loc())  # fmt: skip
    return t


def _placed(attrs: dict, ty: TensorType, buffer) -> dict:
    """``attrs`` with the ``address`` a direct allocation (``buffer=ncc.sbuf.mod_alloc(...)``) gives each block."""
    if isinstance(buffer, DirectAllocation):
        attrs["address"] = buffer.addresses(ty)
    return attrs


def _lazy(api: str, value) -> None:
    """``lazy_initialization`` must be a bool; it never changes what is computed (see the module docstring)."""
    if not isinstance(value, bool):
        raise NkiApiError(f"lazy_initialization= must be True or False, got {value!r}", caller_loc(), api)


def ndarray(shape, dtype, *, buffer=None, name="", lazy_initialization=False):
    """A new tensor whose contents are undefined until written (on-chip memory is not zeroed)."""
    _lazy("nl.ndarray", lazy_initialization)
    ty = _type(shape, dtype, buffer)
    return build_op("alloc", {}, _placed({}, ty, buffer), result_type=ty, hint=name)


def full(shape, fill_value, dtype, *, buffer=None, name="", lazy_initialization=False):
    """A new tensor with every element ``fill_value`` (also with ``lazy_initialization=True``, which is accepted
    and still fills: see the module docstring)."""
    _lazy("nl.full", lazy_initialization)
    ty = _type(shape, dtype, buffer)
    return build_op("nl.full", {}, _placed({"value": float(fill_value)}, ty, buffer), result_type=ty, hint=name)


def zeros(shape, dtype, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.zeros", lazy_initialization)
    return full(shape, 0.0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.ones", lazy_initialization)
    return full(shape, 1.0, dtype, buffer=buffer, name=name)


def _like(a, dtype, buffer):
    t = a.access().tensor.type
    shape = a.shape
    return shape, (dtype if dtype is not None else t.dtype), (buffer if buffer is not None else _default_like(t))


def _default_like(t: TensorType) -> Buffer:
    return t.buffer if t.buffer.on_chip else Buffer.SBUF


def zeros_like(a, dtype=None, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.zeros_like", lazy_initialization)
    shape, dt, buf = _like(a, dtype, buffer)
    return zeros(shape, dt, buffer=buf, name=name)


def ones_like(a, dtype=None, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.ones_like", lazy_initialization)
    shape, dt, buf = _like(a, dtype, buffer)
    return ones(shape, dt, buffer=buf, name=name)


def full_like(a, fill_value, dtype=None, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.full_like", lazy_initialization)
    shape, dt, buf = _like(a, dtype, buffer)
    return full(shape, fill_value, dt, buffer=buf, name=name)


def empty_like(a, dtype=None, *, buffer=None, name="", lazy_initialization=False):
    _lazy("nl.empty_like", lazy_initialization)
    shape, dt, buf = _like(a, dtype, buffer)
    return ndarray(shape, dt, buffer=buf, name=name)
