"""DMA instructions: copies between any two memories and transposes into SBUF."""

from __future__ import annotations

from nki_dsl.errors import NkiTraceError
from nki_dsl.ir.ops.isa import DMA_TRANSPOSE_AXES
from nki_dsl.isa.arguments import enum_name, fn_name, ints, shape_of
from nki_dsl.isa.enums import DgeMode, OobMode
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op, indirect_operands


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=OobMode.error, dge_mode=DgeMode.unknown):
    """Copy ``src`` into ``dst`` (each in HBM, SBUF or PSUM, of the same shape) on a DMA queue, converting to
    ``dst``'s dtype; with ``dst_rmw_op=np.add`` the DMA adds ``src`` to ``dst``'s values. Returns None.
    ``oob_mode`` and ``dge_mode`` are recorded for the cost model (use ``mask=`` for ragged edges).

    An HBM side indexed with an on-chip tile (``src=data[idx, i_f]``: a gather; ``dst=data[idx, i_f]``: a scatter,
    with ``dst_rmw_op=np.add`` a scatter-add) is an indirect DMA (ir/indirect.py)."""
    name = "nisa.dma_copy"
    dst_shape, src_shape = shape_of(dst), shape_of(src)
    if dst_shape is not None and src_shape is not None and dst_shape != src_shape:
        raise NkiTraceError(f"'dst' {list(dst_shape)} and 'src' {list(src_shape)} differ in shape", caller_loc(), name)
    attrs = {
        "dst_rmw_op": fn_name(name, "dst_rmw_op", dst_rmw_op, ("add",), optional=True),
        "oob_mode": enum_name(name, "oob_mode", oob_mode, OobMode),
        "dge_mode": enum_name(name, "dge_mode", dge_mode, DgeMode),
    }
    operands = {"dst": dst, "src": src}
    for side in ("src", "dst"):
        got = indirect_operands(operands[side])
        if got is not None:
            operands[side], extra = got
            operands["indices"] = extra.pop("indices")
            attrs.update(extra)
    build_op(name, operands, attrs, mask=mask)


def dma_transpose(src, *, axes=None, mask=None, dtype=None):
    """``src`` (HBM or SBUF) with its axes permuted into a new SBUF tile by a DMA: the two axes swapped for a
    2-D ``src``; ``axes`` (2, 1, 0) for 3-D and (3, 1, 2, 0) for 4-D, the permutations the DMA engines do."""
    name = "nisa.dma_transpose"
    shape = shape_of(src)
    ndim = len(shape) if shape is not None else 2
    allowed = DMA_TRANSPOSE_AXES.get(ndim, ())
    perm = allowed[0] if axes is None and allowed else ints(name, "axes", axes if axes is not None else ())
    if perm not in allowed:
        shown = ", ".join(str(a) for a in allowed) or "none"
        raise NkiTraceError(
            f"axes={perm} is not a DMA transpose of a rank-{ndim} tile; supported: {shown}", caller_loc(), name
        )
    return build_op(name, {"src": src}, {"axes": perm}, dtype=dtype, mask=mask)
