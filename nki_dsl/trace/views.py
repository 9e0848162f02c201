"""``t.view(dtype)`` of an on-chip tensor or view: its bits reinterpreted as ``dtype`` (reference/nki.md §2.7
"Access patterns & views"), traced as the bit-cast instruction ``ir/bitcast.py`` describes: a new SBUF tile whose
last axis scales by the element-size ratio (``f32 [128, 64]`` -> ``u8 [128, 256]``; ``bf16 [128, 64]`` ->
``i32 [128, 32]``, which needs an even last axis).

The view is read when it is made: it holds the source's bits at that point. It is not written back: writing into
it would leave the source unchanged, so the verifier's ``bitcast`` rule refuses it, and refuses reading a view
after its source was written (hardware would read the new bits). HBM tensors keep their bytes in HBM, where the
reinterpretation would have to alias the storage; that is not modelled (load the tile and view it)."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import bitcast
from nki_dsl.trace.builder import caller_loc

API = "view"


def view(handle, dtype, build_op):
    """The ``NkiTensor`` of ``handle``'s bits as ``dtype`` (``build_op`` is the tensor layer's op builder)."""
    access = handle.access()
    src = access.tensor.type.dtype
    dst = dtypes.normalize(dtype)
    if dst == src:
        return handle
    if not access.tensor.type.buffer.on_chip:
        raise NkiApiError(f"view({dst}) of the HBM tensor '{access.tensor.name}' is not modelled: its bytes would "
                          f"have to alias HBM storage; load it into SBUF and view the tile",
                          caller_loc(), API)  # fmt: skip
    why = bitcast.refusal(src, dst)
    if why is not None:
        raise NkiApiError(f"view({dst}) of a {src} tensor: {why}", caller_loc(), API)
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
