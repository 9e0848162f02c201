"""Tensor-engine instructions: the systolic-array matmul and the transpose (which may also run on Vector)."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.ops.isa import VECTOR_TRANSPOSE_MAX
from nki_dsl.isa.arguments import engine_name, flag, ints, shape_of
from nki_dsl.isa.enums import Engine
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.semantics import build_op


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None):  # fmt: skip
    """``stationary.T @ moving`` on the Tensor engine, into a new fp32 PSUM tile.

    Both operands hold the contraction axis on their partitions: ``stationary`` is ``[K, M]`` (M <= 128) and
    ``moving`` ``[K, N]`` (N <= 512); the result is ``[M, N]``. Accumulate with ``psum[...] += nc_matmul(...)``.
    ``is_stationary_onezero`` / ``is_moving_onezero`` declare an operand holds only zeros and ones and
    ``is_transpose`` selects the PE pass-through (transpose) mode; they do not change the values computed here.
    ``tile_position`` / ``tile_size`` place the matmul on a (row, column) part of the PE array (both or neither).
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
    }
    return build_op(op, {"stationary": stationary, "moving": moving}, attrs, mask=mask)


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
