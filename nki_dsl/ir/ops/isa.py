"""Op table entries for ``nki.isa`` (nisa) engine instructions. Each names the engine it runs on.

Instructions that let the kernel pick an engine (``engine=``) record the choice as an ``engine`` attribute whose
``choices`` are the engines allowed, and ``OpSpec.engine`` holds the default. Function arguments (activation
functions, ALU operators, reductions) are ``fn`` attributes; an absent optional function is ``"none"``.
"""

from __future__ import annotations

import math

from nki_dsl.ir import functions
from nki_dsl.ir.ops import shapes as rules
from nki_dsl.ir.ops.spec import (
    ANY_BUFFER,
    REDUCE_MASK,
    REQUIRED,
    TRANSPOSE_2D,
    AttrKind,
    AttrSpec,
    DtypeRule,
    Family,
    OperandSpec,
    OpSpec,
    Permutation,
    Role,
)
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import shared_fact

INSTRUCTION = Family.INSTRUCTION
FIRST = DtypeRule.FIRST
SBUF = (Buffer.SBUF,)

# Scalar-engine activation functions (reference/nki.md §2.3, "Activation functions").
ACTIVATIONS = (
    "copy", "square", "sigmoid", "relu", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "silu",
    "silu_dx", "tanh", "softplus", "mish", "erf", "erf_dx", "exp", "log", "sin", "arctan", "sqrt", "rsqrt",
    "reciprocal", "sign", "abs",
)  # fmt: skip
ALU_OPS = functions.BINARY
REDUCE_OPS = functions.REDUCIBLE
# Free-axis reductions fused into activation / tensor_scalar (accumulator registers hold fp32 sums and extremes).
ACCUMULATE_OPS = ("add", "maximum", "minimum", "multiply")
REDUCE_CMDS = ("idle", "reset", "reset_reduce", "reduce")
OOB_MODES = ("error", "skip")
DGE_MODES = ("none", "swdge", "hwdge", "unknown")
# The transposes the DMA engines perform, by rank (nki.md §2.3 dma_transpose).
DMA_TRANSPOSE_AXES = {2: ((1, 0),), 3: ((2, 1, 0),), 4: ((3, 1, 2, 0),)}
BN_STATS_WIDTH = 6  # (count, mean, count*var) of the even elements, then of the odd elements
# Hardware limits the result rules below check while tracing come from the target table (reference/nki.md §1.2,
# §2.3); they are the same on every target (``shared_fact``), so checking them does not tie a trace to one.
BN_STATS_FMAX = shared_fact("bn_stats_fmax")  # elements per partition bn_stats reads (nl.tile_size.bn_stats_fmax)
BN_GROUP = 3
VECTOR_TRANSPOSE_MAX = shared_fact("vector_transpose_max")  # the Vector engine transposes at most 32x32 tiles
MATMUL_PERF_MODES = ("none", "double_row")  # nisa.matmul_perf_mode (reference/nki.md §2.6, §2.7 "Enums")
PE_COLUMNS = shared_fact("pe_cols")  # the PE array's columns; a smaller tile_size column count tiles them
DOUBLE_ROWS = 2  # double_row: the first free axis of both operands, folded into the contraction (§1.2, §2.7)


def _copy_shape(shapes, attrs):
    """``tensor_copy``: src's shape; a bit-cast (``view_bytes = (a, b)``) scales the last axis by a / b."""
    shape = tuple(shapes["src"])
    view = tuple(attrs.get("view_bytes") or ())
    if not view:
        return shape
    if len(view) != 2 or min(view) <= 0 or not shape:
        raise rules.ShapeError(f"view_bytes {list(view)} must be (source bytes, result bytes) per element")
    last = shape[-1] * view[0]
    if last % view[1]:
        raise rules.ShapeError(f"the last axis of 'src' {list(shape)} holds {last} bytes, not a whole number of "
                               f"{view[1]}-byte elements")  # fmt: skip
    return shape[:-1] + (last // view[1],)


def _engine_attr(*engines: str) -> AttrSpec:
    return AttrSpec("engine", AttrKind.STR, engines[0], choices=engines)


def _fn(name: str, choices: tuple[str, ...], default=None) -> AttrSpec:
    return AttrSpec(name, AttrKind.FN, REQUIRED if default is None else default, choices=choices)


def _per_partition(shapes: dict, data: str, names: tuple[str, ...]) -> None:
    """Operands broadcast along the free axes must be ``[P, 1]`` tiles with the data's partition count."""
    p = shapes[data][0]
    for n in names:
        s = shapes.get(n)
        if s is not None and (len(s) != 2 or s[0] != p or s[1] != 1):
            raise rules.ShapeError(
                f"operand '{n}' {list(s)} must be a [{p}, 1] tile (one value per partition of "
                f"'{data}' {list(shapes[data])})"
            )


def _at_least_2d(shapes: dict, name: str) -> tuple[int, ...]:
    s = tuple(shapes[name])
    if len(s) < 2:
        raise rules.ShapeError(f"operand '{name}' {list(s)} must be a tile of rank >= 2 (partition axis first)")
    return s


def _nc_matmul_shape(shapes, attrs):
    st, mv = shapes["stationary"], shapes["moving"]
    if attrs.get("perf_mode") == "double_row":
        return _double_row_shape(st, mv, attrs)
    if len(st) != 2 or len(mv) != 2:
        hint = " ([K, 2, N] operands need perf_mode=double_row)" if len(st) == 3 and len(mv) == 3 else ""
        raise rules.ShapeError(f"operands 'stationary' {list(st)} and 'moving' {list(mv)} must be 2-D tiles{hint}")
    if st[0] != mv[0]:
        raise rules.ShapeError(f"contraction (partition) sizes differ: 'stationary' {list(st)} vs 'moving' {list(mv)}")
    return (st[1], mv[1])


def _double_row_shape(st, mv, attrs):
    """``perf_mode=double_row``: ``stationary [K, 2, M]`` and ``moving [K, 2, N]`` contract over K x 2 into
    ``[M, N]``; the PE array is used whole, so no column tiling (reference/nki.md §1.2, §2.7 nc_matmul)."""
    if len(st) != 3 or len(mv) != 3 or st[1] != DOUBLE_ROWS or mv[1] != DOUBLE_ROWS:
        raise rules.ShapeError(
            f"perf_mode=double_row takes 'stationary' [K, 2, M] and 'moving' [K, 2, N] (the contraction runs over "
            f"partitions x 2 rows); got {list(st)} and {list(mv)}"
        )
    if st[0] != mv[0]:
        raise rules.ShapeError(f"contraction (partition) sizes differ: 'stationary' {list(st)} vs 'moving' {list(mv)}")
    size = attrs.get("tile_size") or ()
    if size and size[1] < PE_COLUMNS:
        raise rules.ShapeError(f"perf_mode=double_row cannot be combined with column tiling (tile_size {list(size)})")
    return (st[2], mv[2])


# MX (microscaling) matmul and quantisation, NC-v4 (reference/nki.md §2.7 nc_matmul_mx, quantize_mx, "dtypes"):
# packed data (4 values per element, consecutive along the contraction), one e8m0 scale per group of 8 partitions
# x 4 packed values = 32 values. A 32-partition data quadrant keeps its 4 scale rows at the quadrant's start.
MX_DATA = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")
MX_SCALES = ("float8_e8m0fnu", "uint8")
MX_GROUP_PARTITIONS = 8
MX_QUADRANT = 32
MX_LANES = 4


def mx_scale_rows(partitions: int) -> int:
    """Partitions of an MX scale tile for ``partitions`` data partitions: ``[P // 8, F]`` if P <= 32, else
    ``[P, F]`` with 4 used rows per 32-partition quadrant (§2.7 nc_matmul_mx "Scales")."""
    return partitions // MX_GROUP_PARTITIONS if partitions <= MX_QUADRANT else partitions


def _mx_partitions(name: str, s) -> int:
    if len(s) != 2:
        raise rules.ShapeError(f"operand '{name}' {list(s)} must be a 2-D [P, F] tile")
    if s[0] % MX_QUADRANT:
        raise rules.ShapeError(f"operand '{name}' {list(s)} has {s[0]} partitions; MX tiles span a multiple of "
                               f"{MX_QUADRANT} partitions")  # fmt: skip
    return s[0]


def _mx_scale(shapes, scale: str, data: str, free: int) -> None:
    want = (mx_scale_rows(shapes[data][0]), free)
    if tuple(shapes[scale]) != want:
        raise rules.ShapeError(f"operand '{scale}' {list(shapes[scale])} must be {list(want)}: one scale per 8 "
                               f"partitions x 4 packed values of '{data}' {list(shapes[data])} (4 rows per "
                               f"32-partition quadrant, [P // 8, F] when P <= 32)")  # fmt: skip


def _nc_matmul_mx_shape(shapes, attrs):
    st, mv = shapes["stationary"], shapes["moving"]
    p = _mx_partitions("stationary", st)
    if _mx_partitions("moving", mv) != p:
        raise rules.ShapeError(f"contraction (partition) sizes differ: 'stationary' {list(st)} vs 'moving' {list(mv)}")
    if st[1] % 2:
        raise rules.ShapeError(f"operand 'stationary' {list(st)} must have an even free size")
    _mx_scale(shapes, "stationary_scale", "stationary", st[1])
    _mx_scale(shapes, "moving_scale", "moving", mv[1])
    return (st[1], mv[1])


def _quantize_mx_shape(shapes, attrs):
    s = shapes["src"]
    p = _mx_partitions("src", s)
    if s[1] % MX_LANES:
        raise rules.ShapeError(f"operand 'src' {list(s)} must have a free size that is a multiple of {MX_LANES}")
    _mx_scale({"dst_scale": shapes["dst_scale"], "src": (p, s[1])}, "dst_scale", "src", s[1] // MX_LANES)
    return (p, s[1] // MX_LANES)


def _rand2_shape(shapes, attrs):
    s = tuple(attrs["shape"])
    _per_partition({**shapes, "_": s}, "_", ("min", "max"))
    return s


def _nc_transpose_shape(shapes, attrs):
    s = rules.transposed("data")(shapes, attrs)
    if attrs.get("engine") == "vector" and any(n > VECTOR_TRANSPOSE_MAX for n in s):
        n = VECTOR_TRANSPOSE_MAX
        raise rules.ShapeError(f"operand 'data' {list(shapes['data'])} is larger than the {n}x{n} tiles the "
                               f"Vector engine transposes; use the Tensor engine")  # fmt: skip
    return s


def _activation_shape(shapes, attrs):
    s = _at_least_2d(shapes, "data")
    _per_partition(shapes, "data", ("bias", "scale", "reduce_res"))
    # reads_accumulator prices the instruction at ActReadAccumulator's figure (§3.3), so it is held to what that
    # reads: the engine's [P, 1] registers copied out. Parsed IR claiming it for any other activation is refused.
    readout_form = math.prod(s[1:]) == 1 and attrs.get("op") == "copy" and attrs.get("reduce_op", "none") == "none" \
        and "bias" not in shapes
    if attrs.get("reads_accumulator") and not readout_form:
        raise rules.ShapeError(f"reads_accumulator marks the copy of a [P, 1] accumulator read-out, not an "
                               f"'{attrs.get('op')}' of 'data' {list(shapes['data'])}")
    return s


def _tensor_scalar_shape(shapes, attrs):
    s = _at_least_2d(shapes, "data")
    _per_partition(shapes, "data", ("operand0", "operand1", "reduce_res"))
    return s


def _scalar_tensor_tensor_shape(shapes, attrs):
    _per_partition(shapes, "data", ("operand0",))
    return rules.broadcast({"data": shapes["data"], "operand1": shapes["operand1"]}, attrs)


def _scan_shape(shapes, attrs):
    d0, d1 = _at_least_2d(shapes, "data0"), _at_least_2d(shapes, "data1")
    if d0 != d1:
        raise rules.ShapeError(f"operands 'data0' {list(d0)} and 'data1' {list(d1)} must have the same shape")
    _per_partition(shapes, "data0", ("initial",))
    return d0


def _predicated_shape(shapes, attrs):
    dst = tuple(shapes["dst"])
    for n in ("src", "predicate"):
        if tuple(shapes[n]) != dst:
            raise rules.ShapeError(f"operand '{n}' {list(shapes[n])} must have the shape of 'dst' {list(dst)}")
    return dst


def _dropout_shape(shapes, attrs):
    s = _at_least_2d(shapes, "data")
    # a tile of probabilities broadcasts to data (NumPy rules), e.g. [P, 1]
    if "prob" in shapes and rules.broadcast({"data": s, "prob": shapes["prob"]}, attrs) != s:
        raise rules.ShapeError(f"operand 'prob' {list(shapes['prob'])} does not broadcast to 'data' {list(s)}")
    return s


def _tensor_reduce_shape(shapes, attrs):
    s = _at_least_2d(shapes, "data")
    if 0 in rules.normalize_axes(attrs["axis"], len(s)):
        raise rules.ShapeError(f"axis {list(attrs['axis'])} includes the partition axis 0; tensor_reduce reduces "
                               f"free axes (use nisa.tensor_partition_reduce across partitions)")  # fmt: skip
    return rules.reduce_axes("data")(shapes, attrs)


def _partition_reduce_shape(shapes, attrs):
    return (1, *_at_least_2d(shapes, "data")[1:])


def _bn_stats_shape(shapes, attrs):
    s = _at_least_2d(shapes, "data")
    free = math.prod(s[1:])
    if free > BN_STATS_FMAX:
        raise rules.ShapeError(f"operand 'data' {list(s)} has {free} elements per partition, more than the "
                               f"{BN_STATS_FMAX} bn_stats reads (nl.tile_size.bn_stats_fmax); split the free axis "
                               f"and combine the statistics with nisa.bn_aggr")  # fmt: skip
    return (s[0], BN_STATS_WIDTH)


def _bn_aggr_shape(shapes, attrs):
    s = shapes["data"]
    if len(s) != 2 or s[1] % BN_GROUP or not s[1]:
        raise rules.ShapeError(f"operand 'data' {list(s)} must be [P, 3*k]: (count, mean, count*var) groups as "
                               f"nisa.bn_stats writes them")  # fmt: skip
    return (s[0], 2)


def _affine_select_shape(shapes, attrs):
    return _at_least_2d(shapes, "on_true_tile")


def _dma_transpose_shape(shapes, attrs):
    s = shapes["src"]
    axes = tuple(attrs["axes"])
    if sorted(axes) != list(range(len(s))):
        raise rules.ShapeError(f"axes {list(axes)} is not a permutation of the {len(s)} axes of 'src' {list(s)}")
    return tuple(s[a] for a in axes)


DATA = OperandSpec("data")
PER_PARTITION = dict(scalar=True)  # an immediate, or a [P, 1] tile broadcast along the free axes

ISA_OPS: list[OpSpec] = [
    # -- Tensor engine -------------------------------------------------------------------------------------------
    OpSpec("nisa.nc_matmul", INSTRUCTION,
           (OperandSpec("stationary", buffers=SBUF), OperandSpec("moving", buffers=SBUF)),
           (AttrSpec("is_stationary_onezero", AttrKind.BOOL, False),
            AttrSpec("is_moving_onezero", AttrKind.BOOL, False), AttrSpec("is_transpose", AttrKind.BOOL, False),
            AttrSpec("tile_position", AttrKind.INTS, ()), AttrSpec("tile_size", AttrKind.INTS, ()),
            AttrSpec("perf_mode", AttrKind.STR, "none", choices=MATMUL_PERF_MODES)),
           result=Buffer.PSUM, result_dtype="float32", shape=_nc_matmul_shape, engine="tensor",
           doc="stationary.T @ moving (contraction over partitions), fp32 into PSUM"),
    OpSpec("nisa.nc_matmul_mx", INSTRUCTION,
           (OperandSpec("stationary", buffers=SBUF, dtypes=MX_DATA),
            OperandSpec("moving", buffers=SBUF, dtypes=MX_DATA),
            OperandSpec("stationary_scale", buffers=SBUF, dtypes=MX_SCALES),
            OperandSpec("moving_scale", buffers=SBUF, dtypes=MX_SCALES)),
           (AttrSpec("tile_position", AttrKind.INTS, ()), AttrSpec("tile_size", AttrKind.INTS, ())),
           result=Buffer.PSUM, result_dtype="float32", shape=_nc_matmul_mx_shape, engine="tensor",
           doc="MX matmul: (stationary x its scales).T @ (moving x its scales), contraction over partitions x 4 "
               "packed values, fp32 into PSUM (NC-v4)"),
    OpSpec("nisa.nc_transpose", INSTRUCTION, (DATA,), (_engine_attr("tensor", "vector"),),
           result=Buffer.PSUM, result_dtype=FIRST, shape=_nc_transpose_shape, engine="tensor",
           result_by_attr=("engine", (("tensor", Buffer.PSUM), ("vector", Buffer.SBUF))), permutes=TRANSPOSE_2D,
           doc="2-D transpose: Tensor engine into PSUM (<=128x128) or Vector engine into SBUF (<=32x32)"),
    # -- Scalar engine -------------------------------------------------------------------------------------------
    OpSpec("nisa.activation", INSTRUCTION,
           (DATA, OperandSpec("bias", optional=True), OperandSpec("scale", **PER_PARTITION),
            OperandSpec("reduce_res", role=Role.INOUT, optional=True)),  # read under reduce_cmd=reduce
           (_fn("op", ACTIVATIONS), _fn("reduce_op", ("none",) + ACCUMULATE_OPS, "none"),
            AttrSpec("reduce_cmd", AttrKind.STR, "idle", choices=REDUCE_CMDS),
            # the read-out of the engine's accumulator registers (``reduce_res=`` of the current API,
            # current/isa/accumulators.py): ActReadAccumulator, priced by its own figure (§3.3)
            AttrSpec("reads_accumulator", AttrKind.BOOL, False, implicit=True)),
           result_dtype=FIRST, shape=_activation_shape, engine="scalar", promote=("data",),
           doc="op(data * scale + bias); with reduce_op, reduce_res receives the free-axis reduction"),
    OpSpec("nisa.activation_reduce", INSTRUCTION,
           (DATA, OperandSpec("bias", optional=True), OperandSpec("scale", **PER_PARTITION),
            OperandSpec("reduce_res", role=Role.OUT)),
           (_fn("op", ACTIVATIONS), _fn("reduce_op", ACCUMULATE_OPS)),
           result_dtype=FIRST, shape=_activation_shape, engine="scalar", promote=("data",),
           doc="activation plus the free-axis reduction of its output into reduce_res"),
    # -- Vector engine: elementwise ------------------------------------------------------------------------------
    OpSpec("nisa.tensor_tensor", INSTRUCTION, (OperandSpec("data1"), OperandSpec("data2")),
           (_fn("op", ALU_OPS), _engine_attr("vector", "gpsimd")),
           shape=rules.broadcast, engine="vector", doc="data1 op data2"),
    OpSpec("nisa.tensor_scalar", INSTRUCTION,
           (DATA, OperandSpec("operand0", **PER_PARTITION),
            OperandSpec("operand1", optional=True, optional_while=("op1", "none"), **PER_PARTITION)),
           (_fn("op0", ALU_OPS), AttrSpec("reverse0", AttrKind.BOOL, False), _fn("op1", ("none",) + ALU_OPS, "none"),
            AttrSpec("reverse1", AttrKind.BOOL, False), _engine_attr("vector", "scalar", "gpsimd")),
           result_dtype=FIRST, shape=_tensor_scalar_shape, engine="vector", promote=("data",),
           doc="(data op0 operand0) op1 operand1, operands immediates or [P, 1] tiles; reverse swaps an op's operands"),
    OpSpec("nisa.tensor_scalar_reduce", INSTRUCTION,
           (DATA, OperandSpec("operand0", **PER_PARTITION), OperandSpec("reduce_res", role=Role.OUT)),
           (_fn("op0", ALU_OPS), AttrSpec("reverse0", AttrKind.BOOL, False), _fn("reduce_op", ACCUMULATE_OPS)),
           result_dtype=FIRST, shape=_tensor_scalar_shape, engine="vector", promote=("data",),
           doc="data op0 operand0, and its free-axis reduction into reduce_res"),
    OpSpec("nisa.scalar_tensor_tensor", INSTRUCTION,
           (DATA, OperandSpec("operand0", **PER_PARTITION), OperandSpec("operand1")),
           (_fn("op0", ALU_OPS), _fn("op1", ALU_OPS), AttrSpec("reverse0", AttrKind.BOOL, False),
            AttrSpec("reverse1", AttrKind.BOOL, False)),
           shape=_scalar_tensor_tensor_shape, engine="vector", promote=("data", "operand1"),
           doc="(data op0 operand0) op1 operand1, operand0 an immediate or [P, 1] tile, operand1 a tile"),
    OpSpec("nisa.tensor_tensor_scan", INSTRUCTION,
           (OperandSpec("data0"), OperandSpec("data1"), OperandSpec("initial", **PER_PARTITION)),
           (_fn("op0", ALU_OPS), _fn("op1", ALU_OPS), AttrSpec("reverse0", AttrKind.BOOL, False),
            AttrSpec("reverse1", AttrKind.BOOL, False)),
           shape=_scan_shape, engine="vector", promote=("data0", "data1"),
           doc="r[:, j] = (data0[:, j] op0 r[:, j-1]) op1 data1[:, j], r[:, -1] = initial, along the free axes"),
    OpSpec("nisa.tensor_copy", INSTRUCTION, (OperandSpec("src"),),
           (_engine_attr("vector", "scalar", "gpsimd"),
            # a bit-cast (``t.view(dtype)``, ir/bitcast.py): (source, result) bytes per element; the last axis
            # scales by their ratio and the bits are kept, not the values converted
            AttrSpec("view_bytes", AttrKind.INTS, (), implicit=True)),
           result_dtype=FIRST, shape=_copy_shape, engine="vector",
           doc="a copy of src (SBUF/PSUM -> SBUF); with view_bytes, its bits reinterpreted in the result dtype"),
    OpSpec("nisa.tensor_copy_predicated", INSTRUCTION,
           (OperandSpec("dst", role=Role.INOUT), OperandSpec("src"), OperandSpec("predicate")),
           (AttrSpec("reverse_pred", AttrKind.BOOL, False),), result=None, shape=_predicated_shape, engine="vector",
           doc="dst = src where predicate is nonzero (zero with reverse_pred); other elements of dst are kept"),
    OpSpec("nisa.dropout", INSTRUCTION, (DATA, OperandSpec("prob", scalar=True)), result_dtype=FIRST,
           shape=_dropout_shape, engine="vector", float_only=True,
           doc="data with each element zeroed with probability prob (an immediate or a tile broadcast to data)"),
    OpSpec("nisa.reciprocal", INSTRUCTION, (DATA,), result_dtype=FIRST, shape=rules.same_as("data"),
           engine="vector", doc="1 / data"),
    OpSpec("nisa.memset", INSTRUCTION, (OperandSpec("value", tile=False, scalar=True),),
           (AttrSpec("shape", AttrKind.SHAPE), _engine_attr("vector", "gpsimd")),
           result_dtype="float32", shape=rules.from_attr("shape"), engine="vector", doc="a tile filled with value"),
    OpSpec("nisa.quantize_mx", INSTRUCTION,
           (OperandSpec("src", buffers=SBUF, dtypes=("bfloat16", "float16")),
            OperandSpec("dst_scale", role=Role.OUT, buffers=SBUF, dtypes=MX_SCALES)),
           (), result_dtype="float8_e4m3fn_x4", shape=_quantize_mx_shape, engine="vector",
           doc="MX quantisation: per 8 partitions x 4 values a power-of-two scale into dst_scale, the values "
               "divided by it as packed fp8 (NC-v4)"),
    # -- Random numbers (reference/nki.md §2.7 "Random"): one generator per launch, seeded by set_rng_seed (and
    # nl.random_seed); the backends draw their own streams (the hardware's XORWOW bits are not reproduced).
    OpSpec("nisa.rng", INSTRUCTION, (), (AttrSpec("shape", AttrKind.SHAPE), _engine_attr("vector", "gpsimd")),
           result_dtype="uint32", shape=rules.from_attr("shape"), engine="vector",
           doc="a tile of random 32-bit words, truncated to the low bits of its integer dtype"),
    OpSpec("nisa.rand2", INSTRUCTION,
           (OperandSpec("min", **PER_PARTITION), OperandSpec("max", **PER_PARTITION)),
           (AttrSpec("shape", AttrKind.SHAPE),), result_dtype="float32", shape=_rand2_shape, engine="vector",
           doc="a tile of fp32 uniform draws in [min, max] (immediates or [P, 1] tiles), cast to its dtype"),
    OpSpec("nisa.set_rng_seed", INSTRUCTION, (OperandSpec("src_seeds"),), result=None, shape=None,
           engine="vector", doc="seed the launch's generator with the 32-bit value of a [1, 1] tile"),
    # -- Vector engine: reductions and statistics ----------------------------------------------------------------
    OpSpec("nisa.tensor_reduce", INSTRUCTION, (DATA,),
           (_fn("op", REDUCE_OPS), AttrSpec("axis", AttrKind.INTS), AttrSpec("negate", AttrKind.BOOL, False),
            AttrSpec("keepdims", AttrKind.BOOL, False), REDUCE_MASK),
           result_dtype=FIRST, shape=_tensor_reduce_shape, engine="vector",
           doc="op-reduction of data along free axes; negated when negate"),
    OpSpec("nisa.bn_stats", INSTRUCTION, (DATA,), (REDUCE_MASK,), result_dtype=FIRST, shape=_bn_stats_shape,
           engine="vector",
           doc="per partition: count, mean, count*var of the even elements, then of the odd elements"),
    OpSpec("nisa.bn_aggr", INSTRUCTION, (DATA,), result_dtype=FIRST, shape=_bn_aggr_shape, engine="vector",
           doc="mean and population variance per partition from concatenated (count, mean, count*var) groups"),
    # -- GpSimd engine -------------------------------------------------------------------------------------------
    OpSpec("nisa.tensor_partition_reduce", INSTRUCTION, (DATA,), (_fn("op", REDUCE_OPS),),
           result_dtype=FIRST, shape=_partition_reduce_shape, engine="gpsimd",
           doc="op-reduction across partitions -> [1, F]"),
    OpSpec("nisa.iota", INSTRUCTION, (), (AttrSpec("expr", AttrKind.AFFINE), AttrSpec("shape", AttrKind.SHAPE)),
           result_dtype="int32", shape=rules.from_attr("shape"), engine="gpsimd",
           doc="a tile holding the integer values of an index expression over its axes d0..dn"),
    OpSpec("nisa.affine_select", INSTRUCTION,
           (OperandSpec("on_true_tile"), OperandSpec("on_false_value", tile=False, scalar=True)),
           (AttrSpec("pred", AttrKind.MASK),), result_dtype=FIRST, shape=_affine_select_shape, engine="gpsimd",
           promote=("on_true_tile",),
           doc="on_true_tile where the compile-time predicate over the tile axes holds, else on_false_value"),
    # -- DMA -----------------------------------------------------------------------------------------------------
    OpSpec("nisa.dma_copy", INSTRUCTION,
           (OperandSpec("dst", role=Role.OUT, buffers=ANY_BUFFER), OperandSpec("src", buffers=ANY_BUFFER),
            # an indirect DMA: the rows of the HBM side's dimension indirect_dim come from this tile (ir/indirect.py)
            OperandSpec("indices", buffers=SBUF, optional=True)),
           (_fn("dst_rmw_op", ("none", "add"), "none"), AttrSpec("oob_mode", AttrKind.STR, "error", choices=OOB_MODES),
            AttrSpec("dge_mode", AttrKind.STR, "unknown", choices=DGE_MODES),
            AttrSpec("indirect_dim", AttrKind.INT, 0, implicit=True)),
           result=None, engine="dma", doc="src -> dst (any memory), optionally dst = dst + src"),
    OpSpec("nisa.dma_transpose", INSTRUCTION, (OperandSpec("src", buffers=ANY_BUFFER),),
           (AttrSpec("axes", AttrKind.INTS),), result_dtype=FIRST, shape=_dma_transpose_shape, engine="dma",
           permutes=Permutation(attr="axes"),
           doc="src with its axes permuted (2-D: swapped) into SBUF"),
]  # fmt: skip
