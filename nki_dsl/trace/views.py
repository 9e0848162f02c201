"""``t.view(dtype)`` of an on-chip tensor or view: its bits reinterpreted as ``dtype`` (reference/nki.md §2.7
"Access patterns & views"), traced as the bit-cast instruction ``ir/bitcast.py`` describes: a new SBUF tile whose
last axis scales by the element-size ratio (``f32 [128, 64]`` -> ``u8 [128, 256]``; ``bf16 [128, 64]`` ->
``i32 [128, 32]``, which needs an even last axis).

The view is read when it is made: it holds the source's bits at that point. It is not written back: writing into
it would leave the source unchanged, so the verifier's ``bitcast`` rule refuses it, and refuses reading a view
after its source was written (hardware would read the new bits).

An HBM tensor's view aliases its storage: ``hbm.view`` (ir/hbm_views.py) of the whole tensor, so reads and writes
through it touch the tensor's bytes; a view of part of an HBM tensor (``t[0:64, 16:48].view(u8)``) is the same
part of the whole tensor's view, its last-axis positions and extent scaled by the size ratio."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import bitcast, hbm_views
from nki_dsl.ir.affine import Affine, format_affine, var_kind
from nki_dsl.ir.nodes import Access
from nki_dsl.ir.types import TensorType
from nki_dsl.trace.builder import caller_loc

API = "view"


def view(handle, dtype, build_op):
    """The ``NkiTensor`` of ``handle``'s bits as ``dtype`` (``build_op`` is the tensor layer's op builder); for part
    of an HBM tensor, the ``Access`` of those bits in the whole tensor's view."""
    access = handle.access()
    src = access.tensor.type.dtype
    dst = dtypes.normalize(dtype)
    if dst == src:
        return handle
    why = bitcast.refusal(src, dst)
    if why is not None:
        raise NkiApiError(f"view({dst}) of a {src} tensor: {why}", caller_loc(), API)
    if not access.tensor.type.buffer.on_chip:
        return _hbm_view(access, dst, build_op)
    a, b = bitcast.view_bytes(src, dst)
    if not access.shape or (access.shape[-1] * a) % b:
        raise NkiApiError(f"view({dst}) of {src} {list(access.shape)}: the last axis holds "
                          f"{access.shape[-1] * a if access.shape else 0} bytes, not a whole number of {b}-byte "
                          f"{dst} elements", caller_loc(), API)  # fmt: skip
    return build_op("nisa.tensor_copy", {"src": handle}, {"engine": "vector", "view_bytes": (a, b)}, dtype=dst,
                    hint="view")  # fmt: skip


def pattern_base(access, whole, dtype, offset, build_op):
    """``t.ap(pattern, dtype=...)`` of the view ``access``: its whole tensor (``whole``, a handle) viewed as
    ``dtype`` (the pattern's units are its elements, §2.7 ``.ap``), and the pattern's start in those units
    (``offset``, or the view's own origin)."""
    src = access.tensor.type.dtype
    viewed = view(whole, dtype, build_op)
    if offset is None:
        zero = {f"d{k}": 0 for k in range(len(access.shape))}
        flat, stride = 0, 1
        for k in reversed(range(len(access.tensor.type.shape))):
            e = access.index[k].substitute(zero)
            if not e.is_const:
                raise NkiApiError("ap(dtype=...) of a view that starts at a loop index: pass offset=", caller_loc(),
                                  "ap")  # fmt: skip
            flat += e.const * stride
            stride *= access.tensor.type.shape[k]
        a, b = bitcast.view_bytes(src, dtypes.normalize(dtype))
        if (flat * a) % b:
            raise NkiApiError(f"the view starts {flat * a} bytes into its tensor, not on a {b}-byte element",
                              caller_loc(), "ap")  # fmt: skip
        offset = flat * a // b
    return viewed, offset


def _hbm_view(access, dst: str, build_op):
    """``access`` (of an HBM tensor) viewed as ``dst``: the whole tensor's ``hbm.view`` (a handle), or ``access``
    moved into it (an ``Access``, which the tensor layer makes a view of) unless it is the whole tensor."""
    t = access.tensor
    src = t.type.dtype
    if any(isinstance(s, str) for s in t.type.shape):
        raise NkiApiError(f"view({dst}) of '{t.name}' {list(t.type.shape)}: a shape family's tensor has symbolic "
                          f"dimensions, whose byte sizes the view would scale; declare them concrete",
                          caller_loc(), API)  # fmt: skip
    shape = hbm_views.viewed_shape(tuple(t.type.shape), src, dst)
    a, b = bitcast.view_bytes(src, dst)
    if shape is None:
        last = t.type.shape[-1] * a if t.type.shape else 0
        raise NkiApiError(f"view({dst}) of the {src} HBM tensor '{t.name}' {list(t.type.shape)}: its last dimension "
                          f"holds {last} bytes, not a whole number of {b}-byte {dst} elements",
                          caller_loc(), API)  # fmt: skip
    whole = build_op(hbm_views.VIEW, {"x": t.full_access()}, result_type=TensorType(shape, dst, t.type.buffer),
                     hint=f"{t.name}_v")  # fmt: skip
    if access.is_full:
        return whole
    return _moved(access, whole.access().tensor, a, b)


def _moved(access: Access, viewed, a: int, b: int) -> Access:
    """``access`` of a tensor of ``a``-byte elements as the same bytes of ``viewed``, its ``b``-byte view: the
    access's last axis must run along the tensor's last dimension, contiguously (§2.7: "last dim contiguous and
    divisible"), and start and extent must be whole ``b``-byte elements."""
    n = len(access.shape)
    where = f"view of '{access.tensor.name}' {_shown(access)}"
    if n == 0:
        raise NkiApiError(f"{where}: a single element has no last axis to rescale", caller_loc(), API)
    last, axis = access.index[-1], f"d{n - 1}"
    coef = dict(last.terms).get(axis, 0)
    others = [v for v, _ in last.terms if var_kind(v) == "axis" and v != axis]
    if coef != 1 or others or any(axis in e.vars() for e in access.index[:-1]):
        raise NkiApiError(f"{where}: the view's last axis must run along the tensor's last dimension with stride 1 "
                          f"(§2.7: the last dimension contiguous); view the whole tensor and index the view",
                          caller_loc(), API)  # fmt: skip
    start = last - Affine.var(axis)
    extent = access.shape[-1]
    if a >= b:  # narrowing (or same size): each element becomes a // b
        r = a // b
        return Access(viewed, tuple(access.index[:-1]) + (start * r + Affine.var(axis),),
                      tuple(access.shape[:-1]) + (extent * r,))  # fmt: skip
    r = b // a
    if extent % r or start.const % r or any(c % r for _, c in start.terms):
        raise NkiApiError(f"{where}: {extent} elements from {format_affine(start)} of {a} bytes each are not whole "
                          f"{b}-byte elements (the start and the extent must be multiples of {r})",
                          caller_loc(), API)  # fmt: skip
    scaled = Affine(tuple((v, c // r) for v, c in start.terms), start.const // r)
    return Access(viewed, tuple(access.index[:-1]) + (scaled + Affine.var(axis),),
                  tuple(access.shape[:-1]) + (extent // r,))  # fmt: skip


def _shown(access: Access) -> str:
    return "[" + ", ".join(format_affine(e) for e in access.index) + "]"
