"""The one place trace-time ops are built: normalise operands, infer the result type, emit the IR op.

Every ``nl``/``nisa`` function is a thin wrapper over ``build_op``. Only what is needed to give the result a
type is checked here; hardware rules (buffers, partition limits, bounds) are the verifier's, so they apply the
same way to traced and to parsed IR.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.ir.ops import OPS, REQUIRED
from nki_dsl.ir.ops.shapes import ShapeError
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.index import IndexValue, MaskValue
from nki_dsl.trace.tensor import NkiTensor, is_tile


def build_op(
    name: str,
    operands: dict[str, object],
    attrs: dict[str, object] | None = None,
    *,
    dtype=None,
    mask=None,
    result_type: TensorType | None = None,
    hint: str = "",
) -> NkiTensor | None:
    builder = current(name)
    loc = caller_loc()
    spec = OPS[name]
    ir_operands: dict[str, Access | Imm] = {}
    for ospec in spec.operands:
        value = operands.get(ospec.name)
        if value is None:
            if not ospec.optional:
                raise NkiApiError(f"missing operand '{ospec.name}'", loc, name)
            continue
        ir_operands[ospec.name] = _operand(name, ospec, value, loc)
    unknown = set(operands) - {o.name for o in spec.operands}
    if unknown:
        raise NkiApiError(f"unexpected operand(s) {sorted(unknown)}", loc, name)
    attrs = _attrs(name, spec, attrs or {}, loc)

    result = None
    if spec.result is not None:
        rtype = result_type if spec.result == "declared" else _infer_type(name, spec, ir_operands, attrs, dtype, loc)
        result = builder.new_tensor(rtype, "alloc" if spec.result == "declared" else "tile", hint)
    op = Op(name, ir_operands, attrs, result, loc, _mask(name, mask, spec, ir_operands, result, loc))
    builder.emit(op)
    return NkiTensor(result) if result is not None else None


def _operand(op_name, ospec, value, loc) -> Access | Imm:
    if isinstance(value, Access):
        return value
    if is_tile(value):
        if not ospec.tile:
            raise NkiApiError(f"operand '{ospec.name}' must be a Python number, got a tile", loc, op_name)
        return value.access()
    if isinstance(value, IndexValue | MaskValue):
        raise NkiTraceError(
            f"operand '{ospec.name}' is an index expression, not data; materialise indices with nisa.iota",
            loc,
            op_name,
        )
    if isinstance(value, bool | int | float | np.number):
        if not ospec.scalar:
            raise NkiApiError(f"operand '{ospec.name}' must be a tile, got the number {value!r}", loc, op_name)
        return Imm(value.item() if isinstance(value, np.number) else value)
    raise NkiApiError(
        f"operand '{ospec.name}' must be a tile{' or a number' if ospec.scalar else ''}, "
        f"got {type(value).__name__}",
        loc,
        op_name,
    )


def _attrs(op_name, spec, given: dict, loc) -> dict:
    known = {a.name for a in spec.attrs}
    unknown = set(given) - known
    if unknown:
        raise NkiApiError(f"unexpected argument(s) {sorted(unknown)}", loc, op_name)
    out = {}
    for a in spec.attrs:
        value = given.get(a.name, a.default)
        if value is REQUIRED:
            raise NkiApiError(f"missing argument '{a.name}'", loc, op_name)
        out[a.name] = value
    return out


def _infer_type(op_name, spec, operands, attrs, dtype, loc) -> TensorType:
    tiles = {n: v for n, v in operands.items() if isinstance(v, Access)}
    try:
        shape = spec.shape({n: v.shape for n, v in tiles.items()}, attrs)
    except ShapeError as e:
        raise NkiTraceError(str(e), loc, op_name) from None
    if dtype is not None:
        result_dtype = dtypes.normalize(dtype)
    else:
        result_dtype = _result_dtype(spec, operands)
    return TensorType(tuple(shape), result_dtype, Buffer(spec.result))


def _result_dtype(spec, operands) -> str:
    rule = spec.result_dtype
    if rule in dtypes.BY_NAME:
        return rule
    names = spec.extra.get("promote", [o.name for o in spec.operands if o.role == "in"])
    chosen = [operands[n] for n in names if n in operands]
    tile_dtypes = [v.tensor.type.dtype for v in chosen if isinstance(v, Access)]
    if rule == "first":
        return tile_dtypes[0] if tile_dtypes else "float32"
    result = None
    for d in tile_dtypes:
        result = d if result is None else dtypes.promote(result, d)
    if result is None:
        return "float32"
    for v in chosen:
        if isinstance(v, Imm):
            result = dtypes.promote_scalar(result, v.value)
    return result


def _mask(op_name, mask, spec, operands, result, loc):
    if mask is None:
        return None
    if not isinstance(mask, MaskValue):
        raise NkiApiError(
            f"mask must be a comparison of indices (e.g. i_p < n), got {type(mask).__name__}", loc, op_name
        )
    if result is not None:
        ndim = len(result.type.shape)
    else:
        written = [operands[o.name] for o in spec.writes if o.name in operands]
        ndim = len(written[0].shape) if written else len(mask.shape)
    if len(mask.shape) > ndim:
        raise NkiTraceError(f"mask of rank {len(mask.shape)} is applied to an op of rank {ndim}", loc, op_name)
    aligned = mask.aligned(ndim)
    if spec.extra.get("mask_axes") == "transposed":
        # The kernel writes the mask with the indices of the source it transposes; the IR keeps every mask over
        # the result's axes.
        aligned = aligned.rename({"d0": "d1", "d1": "d0"})
    return aligned


def result_of(value) -> NkiTensor:
    """Narrow ``build_op``'s optional result for ops that always produce one."""
    assert value is not None
    return value


def builder_loc():
    return caller_loc()
