"""The shape of an op table entry: operands with roles and allowed buffers, typed attributes, a result rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

ON_CHIP = ("sbuf", "psum")
HBM = ("hbm", "shared_hbm", "private_hbm")
ANY_BUFFER = ON_CHIP + HBM


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class OperandSpec:
    """``role``: ``in`` (read), ``out`` (written) or ``inout``. ``scalar`` allows a Python-number immediate,
    ``tile`` allows a tensor access. ``buffers`` lists where a tile operand may live. ``optional_while``: an
    optional operand that the op needs unless attribute ``name`` has ``value`` (``operand1`` of
    ``nisa.tensor_scalar`` is read only when ``op1`` is not ``none``)."""

    name: str
    role: str = "in"
    tile: bool = True
    scalar: bool = False
    buffers: tuple[str, ...] = ON_CHIP
    optional: bool = False
    optional_while: tuple[str, object] | None = None

    def needed(self, attrs: dict[str, object]) -> bool:
        """Whether an op with these attributes must carry this operand."""
        if not self.optional:
            return True
        if self.optional_while is None:
            return False
        attr, value = self.optional_while
        return attrs.get(attr, value) != value


@dataclass(frozen=True)
class AttrSpec:
    """``kind`` is one of: int, float, bool, str, dtype, ints (tuple of int), fn (a function name from
    ``ir.functions``), affine, mask, shape. ``choices`` restricts str/fn values. ``implicit``: ops carry the
    attribute only when it is set (builders do not fill in its default), so the text of IR that does not use it
    stays as it was before the attribute existed."""

    name: str
    kind: str
    default: object = REQUIRED
    choices: tuple[str, ...] | None = None
    implicit: bool = False


# A result rule maps (operand shapes by name, attrs) to the result shape; operands that are immediates are absent.
ShapeRule = Callable[[dict[str, tuple[int, ...]], dict[str, object]], tuple[int, ...]]


@dataclass(frozen=True)
class OpSpec:
    """One op. ``family`` groups ops a backend lowers the same way (``unary``, ``binary``, ``reduce``, ...).

    ``result``: where the produced tile lives (``sbuf``, ``psum``), ``declared`` when the op's result type
    carries it (allocations), or None for ops that only write operands. ``result_dtype``: ``promote`` (NKI
    promotion of the tile operands), ``first`` (dtype of the first tile operand), a dtype name, or ``declared``.
    ``engine``: the engine an ``nisa`` instruction names; None for language-level ops (lowering decides).
    ``float_only``: tile operands must be float; ``int_only``: must be integer or bool.
    ``result_by_attr``: for instructions whose result buffer follows an attribute (``nisa.nc_transpose`` writes
    PSUM on the Tensor engine, SBUF on the Vector engine): ``(attr name, ((attr value, buffer), ...))``; values
    not listed keep ``result``. Read the buffer with ``result_buffer(attrs)``.
    """

    name: str
    family: str
    operands: tuple[OperandSpec, ...]
    attrs: tuple[AttrSpec, ...] = ()
    result: str | None = "sbuf"
    result_dtype: str = "promote"
    shape: ShapeRule | None = None
    engine: str | None = None
    float_only: bool = False
    int_only: bool = False
    doc: str = ""
    extra: dict = field(default_factory=dict)
    result_by_attr: tuple[str, tuple[tuple[str, str], ...]] | None = None

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

    def result_buffer(self, attrs: dict[str, object]) -> str | None:
        """Where this op's result lives, given its attributes (``result`` unless ``result_by_attr`` says else)."""
        if self.result_by_attr is None:
            return self.result
        attr, table = self.result_by_attr
        return dict(table).get(attrs.get(attr), self.result)

    @property
    def writes(self) -> tuple[OperandSpec, ...]:
        return tuple(o for o in self.operands if o.role in ("out", "inout"))
