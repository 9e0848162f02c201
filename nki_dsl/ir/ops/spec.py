"""The shape of an op table entry: operands with roles and allowed buffers, typed attributes, a result rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from nki_dsl import dtypes
from nki_dsl.ir.types import Buffer

ON_CHIP = (Buffer.SBUF, Buffer.PSUM)
HBM = (Buffer.HBM, Buffer.SHARED_HBM, Buffer.PRIVATE_HBM)
ANY_BUFFER = ON_CHIP + HBM


class Family(StrEnum):
    """How an op is built and lowered. Language ops share a family when every table treats them alike (all
    ``unary`` ops differ only in ``OpSpec.fn``); every ``nisa`` instruction is an ``INSTRUCTION``, handled by
    name."""

    ALLOC = "alloc"
    FILL = "fill"
    LOAD = "load"
    LOAD_TRANSPOSE2D = "load_transpose2d"
    STORE = "store"
    ASSIGN = "assign"
    COPY = "copy"
    TRANSPOSE = "transpose"
    BROADCAST_TO = "broadcast_to"
    EXPAND_DIMS = "expand_dims"
    MATMUL = "matmul"
    SELECT = "select"
    DROPOUT = "dropout"
    RANDOM_SEED = "random_seed"
    PRINT = "print"
    CONSTANT = "constant"
    RESHAPE = "reshape"
    UNARY = "unary"
    BINARY = "binary"
    REDUCE = "reduce"
    INSTRUCTION = "instruction"


class Engine(StrEnum):
    """The engine an ``nisa`` instruction runs on (reference/nki.md §1.1): four compute engines and the DMA
    queues."""

    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    DMA = "dma"


class Role(StrEnum):
    """What an op does with an operand: reads it, writes it, or both (an accumulator it reads and updates)."""

    IN = "in"
    OUT = "out"
    INOUT = "inout"

    @property
    def reads(self) -> bool:
        return self is not Role.OUT

    @property
    def writes(self) -> bool:
        return self is not Role.IN


class AttrKind(StrEnum):
    """The value type of an attribute; the printer and the parser keep one formatter/reader per kind."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STR = "str"
    DTYPE = "dtype"
    INTS = "ints"  # a tuple of int
    SHAPE = "shape"
    FN = "fn"  # a function name from ``ir.functions``
    AFFINE = "affine"
    MASK = "mask"


class Declared(StrEnum):
    """``OpSpec.result`` / ``result_dtype`` of allocations: the op's result type is given by its caller."""

    DECLARED = "declared"


DECLARED = Declared.DECLARED


class DtypeRule(StrEnum):
    """How an op's result dtype follows from its operands (``OpSpec.result_dtype``, unless a dtype name)."""

    PROMOTE = "promote"  # NKI promotion of the ``promoted`` operands (tiles and immediates)
    FIRST = "first"  # the dtype of the first ``promoted`` tile operand


@dataclass(frozen=True)
class Permutation:
    """An op whose result axis k is axis ``axes[k]`` of its operand, or the permutation held in the attribute
    ``attr``. ``mask_in_source_axes``: kernels write the op's mask with the indices of the source it permutes
    (``nl.transpose``, ``nl.load_transpose2d``); the tracer renames it so that IR masks range over result axes."""

    axes: tuple[int, ...] = ()
    attr: str | None = None
    mask_in_source_axes: bool = False

    def of(self, attrs: dict[str, object]) -> tuple[int, ...] | None:
        if self.attr is None:
            return self.axes
        value = attrs.get(self.attr)
        return tuple(value) if value is not None else None


TRANSPOSE_2D = Permutation((1, 0))


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class OperandSpec:
    """``role``: ``in`` (read), ``out`` (written) or ``inout``. ``scalar`` allows a Python-number immediate,
    ``tile`` allows a tensor access. ``buffers`` lists where a tile operand may live. ``optional_while``: an
    optional operand that the op needs unless attribute ``name`` has ``value`` (``operand1`` of
    ``nisa.tensor_scalar`` is read only when ``op1`` is not ``none``). ``dtypes``: the dtype names a tile operand
    may have, where the op restricts them beyond ``float_only`` / ``int_only`` (the MX matmul's packed data and
    scales; the verifier's ``dtype`` rule checks it)."""

    name: str
    role: Role = Role.IN
    tile: bool = True
    scalar: bool = False
    buffers: tuple[Buffer, ...] = ON_CHIP
    optional: bool = False
    optional_while: tuple[str, object] | None = None
    dtypes: tuple[str, ...] | None = None

    def needed(self, attrs: dict[str, object]) -> bool:
        """Whether an op with these attributes must carry this operand."""
        if not self.optional:
            return True
        if self.optional_while is None:
            return False
        attr, value = self.optional_while
        return attrs.get(attr, value) != value

    def __post_init__(self):  # validate (and normalise plain strings) once, where the table is written
        object.__setattr__(self, "role", Role(self.role))
        object.__setattr__(self, "buffers", tuple(Buffer(b) for b in self.buffers))


@dataclass(frozen=True)
class AttrSpec:
    """``kind`` is one of: int, float, bool, str, dtype, ints (tuple of int), fn (a function name from
    ``ir.functions``), affine, mask, shape. ``choices`` restricts str/fn values. ``implicit``: ops carry the
    attribute only when it is set (builders do not fill in its default), so the text of IR that does not use it
    stays as it was before the attribute existed."""

    name: str
    kind: AttrKind
    default: object = REQUIRED
    choices: tuple[str, ...] | None = None
    implicit: bool = False

    def __post_init__(self):
        object.__setattr__(self, "kind", AttrKind(self.kind))


# The kernel's mask over a reduction's input (its first operand), present only when the mask constrains reduced
# axes: elements where it fails take no part in the reduction (reference/nki.md §1.3 masks; NKI runs
# ``nl.sum(x, axis=1, mask=...)`` over masked columns). ``Op.mask`` keeps the constraints on kept axes, renamed to
# the result's axes: where the result is written.
REDUCE_MASK = AttrSpec("reduce_mask", AttrKind.MASK, None, implicit=True)


def reduce_mask_operand(spec: OpSpec) -> str | None:
    """The operand ``reduce_mask`` ranges over, for ops that take one."""
    return spec.operands[0].name if any(a.name == REDUCE_MASK.name for a in spec.attrs) else None


# A result rule maps (operand shapes by name, attrs) to the result shape; operands that are immediates are absent.
ShapeRule = Callable[[dict[str, tuple[int, ...]], dict[str, object]], tuple[int, ...]]


@dataclass(frozen=True)
class OpSpec:
    """One op. ``family`` groups ops a backend lowers the same way (``unary``, ``binary``, ``reduce``, ...).

    ``result``: where the produced tile lives (``Buffer.SBUF``, ``Buffer.PSUM``), ``DECLARED`` when the op's
    result type carries it (allocations), or None for ops that only write operands. ``result_dtype``: a
    ``DtypeRule`` over the ``promoted`` operands (by default every operand only read), a dtype name, or
    ``DECLARED``.
    ``engine``: the engine an ``nisa`` instruction names; None for language-level ops (lowering decides).
    ``float_only``: tile operands must be float; ``int_only``: must be integer or bool.
    ``result_by_attr``: for instructions whose result buffer follows an attribute (``nisa.nc_transpose`` writes
    PSUM on the Tensor engine, SBUF on the Vector engine): ``(attr name, ((attr value, buffer), ...))``; values
    not listed keep ``result``. Read the buffer with ``result_buffer(attrs)``.
    ``fn``: the ``ir.functions`` name an ``nl`` unary/binary/reduce op computes (None for other ops).
    ``promote``: the operands whose dtypes decide the result dtype, when not every operand read.
    ``permutes``: for ops that permute their operand's axes, how (``Permutation``).
    """

    name: str
    family: Family
    operands: tuple[OperandSpec, ...]
    attrs: tuple[AttrSpec, ...] = ()
    result: Buffer | Declared | None = Buffer.SBUF
    result_dtype: DtypeRule | Declared | str = DtypeRule.PROMOTE  # str: a dtype name (``dtypes.BY_NAME``)
    shape: ShapeRule | None = None
    engine: Engine | None = None
    float_only: bool = False
    int_only: bool = False
    doc: str = ""
    result_by_attr: tuple[str, tuple[tuple[str, Buffer], ...]] | None = None
    fn: str | None = None
    promote: tuple[str, ...] | None = None
    permutes: Permutation | None = None

    def __post_init__(self):
        object.__setattr__(self, "family", Family(self.family))
        if self.engine is not None:
            object.__setattr__(self, "engine", Engine(self.engine))
        if self.result is not None:
            result = self.result
            object.__setattr__(self, "result", DECLARED if result == DECLARED else Buffer(result))
        if self.result_by_attr is not None:
            attr, table = self.result_by_attr
            object.__setattr__(self, "result_by_attr", (attr, tuple((v, Buffer(b)) for v, b in table)))
        if self.promote is not None:
            object.__setattr__(self, "promote", tuple(self.promote))
        rule = self.result_dtype
        if rule not in dtypes.BY_NAME:
            object.__setattr__(self, "result_dtype", DECLARED if rule == DECLARED else DtypeRule(rule))

    def operand(self, name: str) -> OperandSpec:
        for o in self.operands:
            if o.name == name:
                return o
        raise KeyError(name)

    def attr(self, name: str) -> AttrSpec:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def complete_attrs(self, given: dict[str, object]) -> tuple[dict[str, object], list[str], list[str]]:
        """``given`` completed with the table's defaults, in table order (an implicit attribute stays absent
        unless given), with the names of the required attributes that are missing and of those not in the
        table. The tracer and the rewrite engine report the last two in their own terms."""
        out, missing = {}, []
        for a in self.attrs:
            if a.implicit and a.name not in given:
                continue
            value = given.get(a.name, a.default)
            if value is REQUIRED:
                missing.append(a.name)
            else:
                out[a.name] = value
        unknown = sorted(set(given) - {a.name for a in self.attrs})
        return out, missing, unknown

    def result_buffer(self, attrs: dict[str, object]) -> Buffer | Declared | None:
        """Where this op's result lives, given its attributes (``result`` unless ``result_by_attr`` says else)."""
        if self.result_by_attr is None:
            return self.result
        attr, table = self.result_by_attr
        return dict(table).get(attrs.get(attr), self.result)

    @property
    def writes(self) -> tuple[OperandSpec, ...]:
        return tuple(o for o in self.operands if o.role.writes)

    @property
    def promoted(self) -> tuple[str, ...]:
        """The operands whose dtypes decide the result dtype (``promote``, else every operand only read)."""
        if self.promote is not None:
            return self.promote
        return tuple(o.name for o in self.operands if o.role is Role.IN)
