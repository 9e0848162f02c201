"""Op table entries for ``nki.language`` (nl) ops and the structural ops the tracer emits."""

from __future__ import annotations

from nki_dsl.ir import functions
from nki_dsl.ir.ops import shapes as shape_rules
from nki_dsl.ir.ops.spec import (
    ANY_BUFFER,
    DECLARED,
    HBM,
    ON_CHIP,
    REDUCE_MASK,
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

X = OperandSpec("x")
# nl.transpose / nl.load_transpose2d: the kernel writes the mask with the indices of the tile it transposes
SOURCE_AXES_MASK = Permutation((1, 0), mask_in_source_axes=True)
SBUF = (Buffer.SBUF,)
FIRST = DtypeRule.FIRST
X_OR_SCALAR = OperandSpec("x", scalar=True)
# (start partition, byte offset in each partition) per block, in row-major block order: placements the kernel chose
# (direct allocation, language/direct_allocation.py; the current API's nl.ndarray(address=...) for its one block).
# The verifier checks them (rule direct-allocation) and the allocator honours them (passes/allocate.py).
ADDRESS = AttrSpec("address", AttrKind.INTS, (), implicit=True)
# An indirect DMA (ir/indirect.py): the on-chip int tile whose values pick the rows of dimension indirect_dim of the
# HBM side. Both absent on a DMA with static addresses.
INDICES = OperandSpec("indices", buffers=SBUF, optional=True)
INDIRECT_DIM = AttrSpec("indirect_dim", AttrKind.INT, 0, implicit=True)
Y_OR_SCALAR = OperandSpec("y", scalar=True)


def _matmul_shape(shapes, attrs):
    x, y = shapes["x"], shapes["y"]
    if len(x) != 2 or len(y) != 2:
        raise shape_rules.ShapeError(f"operands 'x' {list(x)} and 'y' {list(y)} must be 2-D tiles")
    # transpose_x: x is [K, M] (contraction on partitions); otherwise x is [M, K] and is transposed first.
    m = x[1] if attrs["transpose_x"] else x[0]
    return (m, y[1])


def _expand_dims_shape(shapes, attrs):
    s = list(shapes["x"])
    axes = (attrs["axis"],) if isinstance(attrs["axis"], int) else tuple(attrs["axis"])
    for a in shape_rules.normalize_axes(axes, len(s) + len(axes)):
        s.insert(a, 1)
    return tuple(s)


def _unary(name: str) -> OpSpec:
    int_fn = name in functions.BITWISE or name in functions.LOGICAL
    return OpSpec(f"nl.{name}", Family.UNARY, (X,), shape=shape_rules.same_as("x"),
                  int_only=name in functions.BITWISE, fn=name,
                  result_dtype="bool_" if int_fn and name.startswith("logical") else FIRST)  # fmt: skip


def _binary(name: str) -> OpSpec:
    if name in functions.COMPARISONS or name in functions.LOGICAL:
        rdt = "bool_"
    else:
        rdt = DtypeRule.PROMOTE
    return OpSpec(f"nl.{name}", Family.BINARY, (X_OR_SCALAR, Y_OR_SCALAR), shape=shape_rules.broadcast,
                  result_dtype=rdt, int_only=name in functions.BITWISE, fn=name)  # fmt: skip


def _reduce(name: str, fn: str) -> OpSpec:
    return OpSpec(f"nl.{name}", Family.REDUCE, (X,),
                  (AttrSpec("axis", AttrKind.INTS), AttrSpec("keepdims", AttrKind.BOOL, False), REDUCE_MASK),
                  shape=shape_rules.reduce_axes("x"), result_dtype=FIRST, fn=fn)  # fmt: skip


UNARY_NL = tuple(f for f in functions.UNARY if f != "copy")
BINARY_NL = functions.BINARY
# nl.<name> reduction -> the ir.functions name it reduces with; the only list of them (nl.math builds its
# functions from the op table).
REDUCTIONS = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "all": "logical_and",
              "mean": "mean", "var": "var"}  # fmt: skip

LANGUAGE_OPS: list[OpSpec] = [
    OpSpec("alloc", Family.ALLOC, (), (ADDRESS,),
           result=DECLARED, result_dtype=DECLARED, shape=shape_rules.declared,
           doc="declare a tensor (nl.ndarray, nl.empty_like, an HBM output); its contents start undefined"),
    OpSpec("nl.full", Family.FILL, (), (AttrSpec("value", AttrKind.FLOAT), ADDRESS), result=DECLARED,
           result_dtype=DECLARED, shape=shape_rules.declared,
           doc="declare a tensor filled with a constant (nl.zeros, nl.ones, nl.full)"),
    OpSpec("nl.load", Family.LOAD, (OperandSpec("src", buffers=HBM), INDICES), (INDIRECT_DIM,),
           shape=shape_rules.same_as("src"), result_dtype=FIRST, promote=("src",),
           doc="HBM -> SBUF (with indices: the rows an on-chip tile names, a gather; ir/indirect.py)"),
    OpSpec("nl.load_transpose2d", Family.LOAD_TRANSPOSE2D, (OperandSpec("src", buffers=HBM),),
           shape=shape_rules.transposed("src"), result_dtype=FIRST, doc="HBM -> SBUF with the two dims swapped",
           permutes=SOURCE_AXES_MASK),
    OpSpec("nl.store", Family.STORE,
           (OperandSpec("dst", role=Role.OUT, buffers=HBM), OperandSpec("value"), INDICES), (INDIRECT_DIM,),
           result=None, doc="SBUF/PSUM -> HBM (with indices: to the rows an on-chip tile names, a scatter)"),
    OpSpec("assign", Family.ASSIGN,
           (OperandSpec("dst", role=Role.OUT, buffers=ON_CHIP), OperandSpec("src", scalar=True)),
           (AttrSpec("accumulate", AttrKind.FN, "none", choices=("none",) + functions.REDUCIBLE),
            # Lowered IR only (lower-language): in the first iteration of the loop with this index the destination
            # counts as zero before accumulating: the nl.zeros of a PSUM accumulator folded into its first matmul,
            # which overwrites, as the Tensor engine's first matmul of an accumulation group does. That iteration
            # must run first (a backend reordering the loop keeps it first).
            AttrSpec("zero_first", AttrKind.STR, "", implicit=True)),
           result=None, doc="t[...] = x, or t[...] += x (accumulate=add) into an existing on-chip tensor"),
    OpSpec("nl.copy", Family.COPY, (X,), shape=shape_rules.same_as("x"), result_dtype=FIRST),
    OpSpec("nl.transpose", Family.TRANSPOSE, (X,), shape=shape_rules.transposed("x"), result_dtype=FIRST,
           permutes=SOURCE_AXES_MASK),
    OpSpec("nl.broadcast_to", Family.BROADCAST_TO, (X,), (AttrSpec("shape", AttrKind.INTS),),
           shape=shape_rules.from_attr("shape"), result_dtype=FIRST),
    OpSpec("nl.expand_dims", Family.EXPAND_DIMS, (X,), (AttrSpec("axis", AttrKind.INTS),), shape=_expand_dims_shape,
           result_dtype=FIRST),
    OpSpec("nl.matmul", Family.MATMUL, (OperandSpec("x", buffers=SBUF), OperandSpec("y", buffers=SBUF)),
           (AttrSpec("transpose_x", AttrKind.BOOL, False),), result=Buffer.PSUM, result_dtype="float32",
           shape=_matmul_shape, doc="x @ y (or x.T @ y with transpose_x) on the Tensor engine, fp32 into PSUM"),
    OpSpec("nl.where", Family.SELECT, (OperandSpec("condition"), X_OR_SCALAR, Y_OR_SCALAR),
           shape=shape_rules.broadcast),
    OpSpec("nl.dropout", Family.DROPOUT, (X, OperandSpec("rate", scalar=True)), shape=shape_rules.same_as("x"),
           result_dtype=FIRST, float_only=True),
    OpSpec("nl.random_seed", Family.RANDOM_SEED, (OperandSpec("seed", scalar=True),), result=None),
    # The simulator's debugging output (reference/nki.md §2.7 device_print): the values of an SBUF or HBM tensor
    # at that point of the run, printed to stdout with a constant prefix. Not an engine instruction.
    OpSpec("nl.device_print", Family.PRINT,
           (OperandSpec("x", buffers=(Buffer.SBUF, Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM)),),
           (AttrSpec("prefix", AttrKind.STR),), result=None,
           doc="print the tensor's values, after the prefix, when the kernel runs on a backend"),
    OpSpec("nl.shared_constant", Family.CONSTANT, (), (AttrSpec("data", AttrKind.STR),), result=DECLARED,
           result_dtype=DECLARED, shape=shape_rules.declared,
           doc="a read-only HBM tensor holding compile-time data (zlib-compressed, base64 raw bytes of its type)"),
    OpSpec("hbm.reshape", Family.RESHAPE, (OperandSpec("x", buffers=HBM),), (AttrSpec("shape", AttrKind.INTS),),
           result=DECLARED, result_dtype=DECLARED, shape=shape_rules.declared,
           doc="a reshaped view of an HBM tensor (same storage)"),
    # t.view(dtype) of an HBM tensor: the result type gives the dtype and the §2.7 shape (ir/hbm_views.py)
    OpSpec("hbm.view", Family.RESHAPE, (OperandSpec("x", buffers=HBM),), result=DECLARED, result_dtype=DECLARED,
           shape=shape_rules.declared, doc="an HBM tensor's bytes read as another dtype (same storage)"),
    *(_unary(f) for f in UNARY_NL),
    *(_binary(f) for f in BINARY_NL),
    *(_reduce(n, f) for n, f in REDUCTIONS.items()),
]

__all__ = ["LANGUAGE_OPS", "ANY_BUFFER"]
