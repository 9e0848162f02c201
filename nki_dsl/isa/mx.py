"""MX (microscaling) instructions of NC-v4 (reference/nki.md §2.7 nc_matmul_mx, quantize_mx): the MX matmul of
packed fp8/fp4 tiles with their e8m0 scales, and the quantisation that makes such tiles from bf16/fp16. They are
0.6 instructions; the current API (``nki_dsl.current.isa``) wraps these in destination-passing form. The numbers
both compute are in ``nki_dsl/ir/mx.py``."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.ops.isa import MX_DATA, PE_COLUMNS
from nki_dsl.isa.arguments import ints
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import build_op

MX_NC_VERSION = 4  # NC-v4 (Trn3) only: §2.7 "nc_matmul_mx ... v4", "quantize_mx ... v4"


def require_mx(op: str) -> None:
    """Refuse MX instructions on targets before NC-v4; reading the generation ties the trace to it."""
    version = current(op).target_fact("nc_version")
    if version < MX_NC_VERSION:
        raise NkiApiError(f"{op} runs on NeuronCore-v{MX_NC_VERSION} (trn3) only; this kernel is being traced for "
                          f"a NeuronCore-v{version} target", caller_loc(), op)  # fmt: skip


def nc_matmul_mx(stationary, moving, stationary_scale, moving_scale, *, tile_position=(), tile_size=()):
    """``(stationary x scales).T @ (moving x scales)`` into a new fp32 PSUM tile ``[M, N]``: ``stationary [P, M]``
    and ``moving [P, N]`` hold 4 values per element along the contraction (K = 4P), each group of 8 partitions x
    4 values shares the scale of its column (``[P, F]`` scale tiles with 4 used rows per 32-partition quadrant,
    ``[P // 8, F]`` for P <= 32). ``tile_position`` / ``tile_size``: row tiling only."""
    op = "nisa.nc_matmul_mx"
    require_mx(op)
    position, size = ints(op, "tile_position", tile_position or ()), ints(op, "tile_size", tile_size or ())
    if len(position) != len(size) or len(size) not in (0, 2):
        raise NkiApiError(f"tile_position {list(position)} and tile_size {list(size)} must both be (row, column) "
                          f"pairs or both be empty", caller_loc(), op)  # fmt: skip
    if size and (size[1] != PE_COLUMNS or position[1] != 0):
        raise NkiApiError(f"tile_size {list(size)} / tile_position {list(position)}: the MX matmul tiles rows only "
                          f"(columns stay the whole {PE_COLUMNS}, §2.7 nc_matmul_mx)", caller_loc(), op)  # fmt: skip
    operands = {"stationary": stationary, "moving": moving, "stationary_scale": stationary_scale,
                "moving_scale": moving_scale}  # fmt: skip
    return build_op(op, operands, {"tile_position": position, "tile_size": size})


def quantize_mx(src, dst_scale, *, dtype="float8_e4m3fn_x4"):
    """``src [P, F]`` (bf16/fp16, SBUF) quantised to a new packed ``[P, F // 4]`` tile of ``dtype``
    (``float8_e4m3fn_x4`` or ``float8_e5m2_x4``); the group scales are written into ``dst_scale`` in the layout
    ``nc_matmul_mx`` reads."""
    op = "nisa.quantize_mx"
    require_mx(op)
    name = dtypes.normalize(dtype)
    if name not in MX_DATA[:2]:
        raise NkiApiError(f"dtype {name} is not an fp8 x4 type; quantize_mx writes {' or '.join(MX_DATA[:2])}",
                          caller_loc(), op)  # fmt: skip
    return build_op(op, {"src": src, "dst_scale": dst_scale}, dtype=name)
