"""The one place trace-time ops are built: normalise operands, infer the result type, emit the IR op.

Every ``nl``/``nisa`` function is a thin wrapper over ``trace.tensor.build_op``, which calls ``emit_op`` here and
hands the result back as a tensor handle. This module sees handles only as ``TileHandle`` (what they have in
common: an access), so it does not import the handles, whose operators call back into it. Only what is needed
to give the result a type is checked here; hardware rules (buffers, partition limits, bounds) are the
verifier's, so they apply the same way to traced and to parsed IR.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir.affine import Mask, var_kind, var_number
from nki_dsl.ir.nodes import Access, Imm, MaskShape, Op
from nki_dsl.ir.ops import DECLARED, OPS, REDUCE_MASK, DtypeRule, Family, Role, reduce_mask_operand
from nki_dsl.ir.ops import shapes as shape_rules
from nki_dsl.ir.ops.shapes import ShapeError
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.handle import TileHandle
from nki_dsl.trace.index import IndexValue, MaskValue
from nki_dsl.trace.symbolic import InconclusiveDimensionError


def emit_op(
    name: str,
    operands: dict[str, object],
    attrs: dict[str, object] | None = None,
    *,
    dtype=None,
    mask=None,
    result_type: TensorType | None = None,
    hint: str = "",
) -> Op:
    """Check the operands and attributes of op ``name``, type its result, and emit it into the active kernel."""
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
    if builder.symbols is not None:  # tracing a shape family
        _concrete_views(name, ir_operands, loc)
    unknown = set(operands) - {o.name for o in spec.operands}
    if unknown:
        raise NkiApiError(f"unexpected operand(s) {sorted(unknown)}", loc, name)
    attrs = _attrs(name, spec, attrs or {}, loc)
    ir_operands = _align_ranks(spec, ir_operands, attrs)

    result = None
    if spec.result is not None:
        declared = spec.result is DECLARED
        rtype = result_type if declared else _infer_type(name, spec, ir_operands, attrs, dtype, loc)
        result = builder.new_tensor(rtype, "alloc" if declared else "tile", hint)
    # may add the reduction's reduce_mask to attrs
    mask, mask_shape = _mask(name, mask, spec, ir_operands, result, loc, attrs)
    op = Op(name, ir_operands, attrs, result, loc, mask, mask_shape)
    builder.emit(op)
    return op


RESHAPE_OP = "hbm.reshape"


def _concrete_views(op_name, operands: dict, loc) -> None:
    """A shape family's ops work on tiles of concrete size: an operand that views a whole symbolic dimension of
    an HBM tensor (``nl.load(x)`` of an ``N x 512`` family) is refused with the dimension named. A reshape views
    its whole source (no element moves), so its operand may."""
    if op_name == RESHAPE_OP:
        return
    for oname, a in operands.items():
        if isinstance(a, Access) and any(isinstance(s, str) for s in a.shape):
            symbols = ", ".join(s[1:] for s in a.shape if isinstance(s, str))
            raise InconclusiveDimensionError(
                f"operand '{oname}' views [{', '.join(str(s).lstrip('$') for s in a.shape)}] of "
                f"%{a.tensor.name}: an op's operand has concrete sizes, and dimension {symbols} is symbolic in this "
                f"shape family; index the tensor with tiles (nl.arange, nl.ds) and mask the ragged edge, or "
                f"declare {symbols} concrete", loc, op_name)  # fmt: skip


def _operand(op_name, ospec, value, loc) -> Access | Imm:
    if isinstance(value, Access):
        return value
    if isinstance(value, TileHandle):
        if not ospec.tile:
            raise NkiApiError(f"operand '{ospec.name}' must be a Python number, got a tile", loc, op_name)
        return value.access()
    if isinstance(value, IndexValue) and ospec.tile and not any(var_kind(v) == "axis" for v in value.expr.vars()):
        return _iteration_scalar(value, loc)
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


def _iteration_scalar(value: IndexValue, loc) -> Access:
    """A loop index (or an expression of loop indices and program ids, ``k_i + j * n``) used as data: one integer
    per iteration, as AWS's kernels use it (``nl.add(seed, offset)`` to derive a per-tile dropout seed). It is
    materialised as a ``[1, 1]`` int32 tile (``nisa.iota``), which broadcasts like any ``[1, 1]`` operand."""
    op = emit_op("nisa.iota", {}, {"expr": value.aligned(2), "shape": (1, 1)}, dtype="int32")  # at caller_loc()
    return op.result.full_access()


def _align_ranks(spec, operands: dict, attrs: dict) -> dict:
    """Give tile operands the ranks the op combines them at.

    * A tile always has a free axis: a 1-D access (``A[0:128, j]``, a 1-D HBM tensor) is read as ``[n, 1]``, and
      one element (``seed[0]`` of a 1-D tensor, as AWS's kernels load a seed) as ``[1, 1]``.
    * Operands of lower rank than the op broadcast *partition-aligned*: their partition axis lines up with the
      others' and size-1 axes are inserted after it (``[128, 1]`` against ``[128, 4, 8]`` reads as
      ``[128, 1, 1]``), because a tile's first axis is always its partition axis. Equal ranks broadcast as in
      NumPy.
    """
    if spec.family is Family.RESHAPE:
        return operands
    out = {n: _pad_to(v, 2) if isinstance(v, Access) and len(v.shape) < 2 else v for n, v in operands.items()}
    tiles = {n: v for n, v in out.items() if isinstance(v, Access)}
    if spec.shape is shape_rules.broadcast and tiles:
        rank = max(len(v.shape) for v in tiles.values())
        return {n: _pad_to(v, rank) if n in tiles else v for n, v in out.items()}
    if spec.family in (Family.ASSIGN, Family.STORE):
        dst = next((out[o.name] for o in spec.writes if isinstance(out.get(o.name), Access)), None)
        srcs = [o.name for o in spec.operands if o.role is Role.IN and isinstance(out.get(o.name), Access)]
        if dst is not None:
            return {n: _pad_to(v, len(dst.shape)) if n in srcs else v for n, v in out.items()}
    if spec.family is Family.BROADCAST_TO and isinstance(out.get("x"), Access):
        return {**out, "x": _pad_to(out["x"], len(attrs["shape"]))}
    return out


def _pad_to(a: Access, rank: int) -> Access:
    """``a`` with size-1 axes inserted after its partition axis up to ``rank`` (no new index terms: the new axes
    are broadcast)."""
    k = rank - len(a.shape)
    if k <= 0:
        return a
    if not a.shape:  # one element: a partition axis and free axes of size 1, all broadcast
        return Access(a.tensor, a.index, (1,) * rank)
    shift = {f"d{j}": f"d{j + k}" for j in range(1, len(a.shape))}
    index = tuple(e.rename(shift) for e in a.index)
    return Access(a.tensor, index, (a.shape[0],) + (1,) * k + tuple(a.shape[1:]))


def _attrs(op_name, spec, given: dict, loc) -> dict:
    out, missing, unknown = spec.complete_attrs(given)
    if unknown:
        raise NkiApiError(f"unexpected argument(s) {unknown}", loc, op_name)
    if missing:
        raise NkiApiError(f"missing argument '{missing[0]}'", loc, op_name)
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
    return TensorType(tuple(shape), result_dtype, Buffer(spec.result_buffer(attrs)))


def _result_dtype(spec, operands) -> str:
    rule = spec.result_dtype
    if not isinstance(rule, DtypeRule):
        return rule  # a dtype name
    chosen = [operands[n] for n in spec.promoted if n in operands]
    tile_dtypes = [v.tensor.type.dtype for v in chosen if isinstance(v, Access)]
    if rule is DtypeRule.FIRST:
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


def _reduction(spec, operands, attrs) -> tuple[Access, set[int], dict[str, str]] | None:
    """For an op that reduces free axes of its first operand: that operand, its reduced axes and the renaming of
    its kept axes to the result's (``nl`` reductions and ``nisa.tensor_reduce`` by ``axis``/``keepdims``,
    ``nisa.bn_stats`` every free axis into its statistics)."""
    if reduce_mask_operand(spec) is None:
        return None
    data = operands.get(spec.operands[0].name)
    if not isinstance(data, Access):
        return None
    rank = len(data.shape)
    if "axis" not in attrs:  # bn_stats: the partition axis is kept
        return data, set(range(1, rank)), {"d0": "d0"}
    reduced = set(shape_rules.normalize_axes(attrs["axis"], rank))
    if attrs["keepdims"]:
        return data, reduced, {f"d{k}": f"d{k}" for k in range(rank) if k not in reduced}
    kept = [k for k in range(rank) if k not in reduced]
    return data, reduced, {f"d{k}": f"d{j}" for j, k in enumerate(kept)}


def _reduction_mask(op_name, spec, mask: MaskValue, red, out_rank: int, attrs: dict, loc) -> Mask | None:
    """A reduction's mask written over its input's axes. Constraints on kept axes become the op's mask, over the
    result's axes (where it writes); when some constraint names a reduced axis the whole mask is also kept over
    the input as ``reduce_mask`` (set in ``attrs``): masked-off elements take no part in the reduction."""
    data, reduced, rename = red
    aligned = mask.aligned(len(data.shape))
    kept, on_reduced = [], False
    for c in aligned.constraints:
        axes = {var_number(v) for v in c.vars() if var_kind(v) == "axis"}
        if axes & reduced:
            on_reduced = True
        else:
            kept.append(c.rename(rename))
    if on_reduced:
        if spec.fn in ("mean", "var"):
            raise NkiTraceError(
                f"the mask constrains a reduced axis of {op_name}, whose element count it would change; reduce "
                f"with nl.sum under the mask and divide by the count of unmasked elements",
                loc,
                op_name,
            )
        attrs[REDUCE_MASK.name] = aligned
    moved = Mask.of(*kept) if kept else None
    if moved is not None and any(var_number(v) >= out_rank for v in moved.vars() if var_kind(v) == "axis"):
        raise NkiTraceError(f"mask of rank {len(mask.shape)} does not fit the result of rank {out_rank}", loc, op_name)
    return moved


def _mask(op_name, mask, spec, operands, result, loc, attrs=None) -> tuple[Mask | None, MaskShape | None]:
    """The op's mask over its axes, and the shape of the index it was built from over the same axes (the
    ``mask-shape`` rule checks that it broadcasts onto them; the Mask alone cannot say)."""
    if mask is None or isinstance(mask, Mask):
        return mask, None  # None, or already over the op's axes (inherited from the op that computed the value)
    if not isinstance(mask, MaskValue):
        raise NkiApiError(
            f"mask must be a comparison of indices (e.g. i_p < n), got {type(mask).__name__}", loc, op_name
        )
    if result is not None:
        ndim = len(result.type.shape)
    else:
        written = [operands[o.name] for o in spec.writes if o.name in operands]
        ndim = len(written[0].shape) if written else len(mask.shape)
    red = _reduction(spec, operands, attrs)
    # A reduction's mask ranges over its input (NKI's iteration space of the instruction) when written at the
    # input's rank; bn_stats's result axes (the statistics) cannot be masked, so its mask always does.
    if red is not None and (len(mask.shape) == len(red[0].shape) or "axis" not in attrs):
        over = MaskShape(_padded(mask.shape, len(red[0].shape)), reduce_mask_operand(spec), tuple(mask.shape))
        return _reduction_mask(op_name, spec, mask, red, ndim, attrs, loc), over
    if len(mask.shape) > ndim:
        raise NkiTraceError(f"mask of rank {len(mask.shape)} is applied to an op of rank {ndim}", loc, op_name)
    aligned, extents = mask.aligned(ndim), _padded(mask.shape, ndim)
    if spec.permutes is not None and spec.permutes.mask_in_source_axes:
        # The kernel writes the mask with the indices of the source it transposes; the IR keeps every mask over
        # the result's axes.
        aligned = aligned.rename({"d0": "d1", "d1": "d0"})
        extents = (extents[1], extents[0], *extents[2:]) if len(extents) >= 2 else extents
    return aligned, MaskShape(extents, None, tuple(mask.shape))


def _padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """A mask's shape aligned to ``ndim`` axes as ``MaskValue.aligned`` aligns its axes (leading 1s)."""
    return (1,) * (ndim - len(shape)) + tuple(shape)
