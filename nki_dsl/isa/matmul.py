"""Tensor-engine instructions: the systolic-array matmul and the transpose (which may also run on Vector)."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.ops.isa import VECTOR_TRANSPOSE_MAX
from nki_dsl.isa.arguments import engine_name, enum_name, flag, ints, shape_of
from nki_dsl.isa.enums import Engine, MatmulPerfMode
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), perf_mode=MatmulPerfMode.none, mask=None):  # fmt: skip
    """``stationary.T @ moving`` on the Tensor engine, into a new fp32 PSUM tile.

    Both operands hold the contraction axis on their partitions: ``stationary`` is ``[K, M]`` (M <= 128) and
    ``moving`` ``[K, N]`` (N <= 512); the result is ``[M, N]``. Accumulate with ``psum[...] += nc_matmul(...)``.
    ``is_stationary_onezero`` / ``is_moving_onezero`` declare an operand holds only zeros and ones and
    ``is_transpose`` selects the PE pass-through (transpose) mode; they do not change the values computed here.
    ``tile_position`` / ``tile_size`` place the matmul on a (row, column) part of the PE array (both or neither).
    ``perf_mode=nisa.matmul_perf_mode.double_row`` (or ``"double_row"``; FP8 operands, NC-v3+) contracts
    ``stationary [K, 2, M]`` with ``moving [K, 2, N]`` over K x 2 rows into ``[M, N]`` (reference/nki.md §1.2,
    §2.7): the result is ``sum over k, r of stationary[k, r, m] * moving[k, r, n]``, accumulated in fp32.
    """
    op = "nisa.nc_matmul"
    position, size = ints(op, "tile_position", tile_position), ints(op, "tile_size", tile_size)
    if len(position) != len(size) or len(size) not in (0, 2):
        raise NkiApiError(
            f"tile_position {list(position)} and tile_size {list(size)} must both be (row, column) pairs or both "
            f"be empty",
            caller_loc(),
            op,
        )
    attrs = {
        "is_stationary_onezero": flag(op, "is_stationary_onezero", is_stationary_onezero),
        "is_moving_onezero": flag(op, "is_moving_onezero", is_moving_onezero),
        "is_transpose": flag(op, "is_transpose", is_transpose),
        "tile_position": position,
        "tile_size": size,
        "perf_mode": enum_name(op, "perf_mode", perf_mode, MatmulPerfMode),
    }
    if attrs["perf_mode"] == "double_row":
        _double_row_operands(op, stationary, moving)
    _fp32_only_with_fp32(op, stationary, moving)
    return build_op(op, {"stationary": stationary, "moving": moving}, attrs, mask=mask)


_FP32_CLASS = ("float32", "tfloat32")


def _fp32_only_with_fp32(op: str, stationary, moving) -> None:
    """The instruction mixes input dtypes, "except fp32/tf32 only with fp32/tf32" (reference/nki.md §2.7 TensorE).
    Checked where a kernel calls the instruction: ``nl.matmul`` (which converts for itself) lowers to it too."""
    kinds = {}
    for name, tile in (("stationary", stationary), ("moving", moving)):
        dtype = getattr(tile, "dtype", None)
        if dtype is None:
            return  # not a tile: build_op reports it
        kinds[name] = dtypes.normalize(dtype)
    wide = [n for n, k in kinds.items() if k in _FP32_CLASS]
    if len(wide) == 1:
        other = "moving" if wide[0] == "stationary" else "stationary"
        raise NkiApiError(f"operand '{wide[0]}' is {kinds[wide[0]]} but operand '{other}' is {kinds[other]}; the "
                          f"Tensor engine multiplies fp32/tf32 only with fp32/tf32 (convert one of them, e.g. "
                          f"with nisa.tensor_copy into a tile of the other's dtype)", caller_loc(), op)  # fmt: skip


def _double_row_operands(op: str, stationary, moving) -> None:
    """Double-row mode multiplies FP8 tiles only (reference/nki.md §2.7 nc_matmul: "fp8 only")."""
    for name, tile in (("stationary", stationary), ("moving", moving)):
        dtype = getattr(tile, "dtype", None)
        if dtype is None:
            continue  # not a tile: build_op reports it
        dt = dtypes.normalize(dtype)
        if dt not in ("float8_e4m3", "float8_e5m2"):
            raise NkiApiError(
                f"perf_mode=double_row multiplies fp8 tiles (float8_e4m3 / float8_e5m2); operand '{name}' is {dt}",
                caller_loc(),
                op,
            )


def nc_transpose(data, *, mask=None, dtype=None, engine=Engine.unknown):
    """The 2-D transpose of ``data``: on the Tensor engine into PSUM (up to 128x128), or on the Vector engine
    into SBUF (up to 32x32). ``engine=nisa.unknown_engine`` picks Vector for tiles of at most 32x32, else Tensor.
    The values are exact; ``dtype`` defaults to the input's."""
    op = "nisa.nc_transpose"
    shape = shape_of(data)
    small = shape is not None and all(s <= VECTOR_TRANSPOSE_MAX for s in shape)
    chosen = engine_name(op, engine, default="vector" if small else "tensor")
    # The result buffer follows the engine (OpSpec.result_by_attr).
    return build_op(op, {"data": data}, {"engine": chosen}, dtype=dtype, mask=mask)
