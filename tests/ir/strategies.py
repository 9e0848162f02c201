"""Hypothesis strategies for random well-formed kernels built from the op table (reusable by other test packages).

"Well-formed" means what the text form needs: names are unique and defined before use, operand and attribute
names come from each op's spec, attribute values have their spec's kind, and a result's kind follows from its op.
The kernels are not verified: shapes, buffers and scopes are random, which is what a printer/parser test wants.

Strategies are built once at module level and lists are indexed with integer draws: building a Hypothesis
strategy per draw (``sampled_from(a_list)``) costs more than the whole print/parse round trip.
"""

from __future__ import annotations

from hypothesis import strategies as st

from nki_dsl import dtypes
from nki_dsl.errors import SourceLoc
from nki_dsl.ir import functions, ops
from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Tensor
from nki_dsl.ir.ops import AttrSpec, OpSpec
from nki_dsl.ir.printer import result_kind
from nki_dsl.ir.types import Buffer, TensorType

MAX_LOOP_DEPTH = 3
FILES = ("kernel.py", "lib/tiles.py", "/abs/path with spaces/k.py", 'quote"and\\slash.py', "ünïcode.py")
KERNEL_NAMES = ("kernel", "vit_attn", "k2", "añadir")
NAME_HINTS = ("", "a", "acc", "c_output", "tile", "ñu")  # "" gives a numbered tile, like the tracer's %0
DTYPES = tuple(sorted(dtypes.BY_NAME))
FN_NAMES = functions.UNARY + functions.BINARY

sizes = st.sampled_from((1, 2, 3, 4, 64, 128, 512))
shapes = st.lists(sizes, max_size=3).map(tuple)
small_ints = st.integers(-300, 300)
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = st.one_of(small_ints, floats, st.booleans())
# IR strings are printable text (nki_dsl/ir/strings.py): the printer refuses anything else, as the parser does.
texts = st.text(st.characters(codec="utf-8").filter(str.isprintable), max_size=8)
constants = st.recursive(st.one_of(st.none(), scalars, texts), lambda inner: st.lists(inner, max_size=3).map(tuple),
                         max_leaves=6)  # fmt: skip
small_int_tuples = st.lists(st.integers(-4, 4), max_size=3).map(tuple)


def _pick(draw, items):
    return items[draw(st.integers(0, len(items) - 1))]


def _tensor_type(draw) -> TensorType:
    shape = draw(shapes)
    par_axis = draw(st.integers(0, len(shape) - 1)) if shape else 0
    return TensorType(shape, _pick(draw, DTYPES), _pick(draw, tuple(Buffer)), par_axis)


def _affine(draw, variables: list[str]) -> Affine:
    coefs: dict[str, int] = {}
    for _ in range(draw(st.integers(0, 3)) if variables else 0):
        coefs[_pick(draw, variables)] = draw(st.integers(-256, 256))
    return Affine.of(draw(st.integers(-1000, 1000)), **coefs)


def _mask(draw, variables: list[str]) -> Mask:
    return Mask.of(*(_affine(draw, variables) for _ in range(draw(st.integers(0, 3)))))


tensor_types = st.composite(_tensor_type)()


class _KernelDraw:
    """The state of one drawn kernel: tensors defined so far, loop indices in scope, name counters."""

    def __init__(self, draw, op_table: dict[str, OpSpec], source_file: str, grid: tuple[int, ...]):
        self.draw = draw
        self.specs = [op_table[name] for name in sorted(op_table)]
        self.source_file = source_file
        self.pids = [f"pid{k}" for k in range(len(grid))]
        self.tensors: list[Tensor] = []
        self.loops: list[str] = []
        self.tensor_count = 0
        self.loop_count = 0

    def fresh_tensor(self, type_: TensorType, kind: str) -> Tensor:
        self.tensor_count += 1
        hint = _pick(self.draw, NAME_HINTS)
        tensor = Tensor(f"{hint}_{self.tensor_count}" if hint else str(self.tensor_count), type_, kind)
        self.tensors.append(tensor)
        return tensor

    def loc(self) -> SourceLoc:
        file = _pick(self.draw, (self.source_file,) * 3 + FILES)
        return SourceLoc(file, self.draw(st.integers(0, 2000)))

    def variables(self, rank: int) -> list[str]:
        return [f"d{k}" for k in range(rank)] + self.loops + self.pids

    def body(self, depth: int, max_len: int) -> list:
        stmts = []
        for _ in range(self.draw(st.integers(0, max_len))):
            if depth < MAX_LOOP_DEPTH and self.draw(st.integers(0, 4)) == 0:
                stmts.append(self.loop(depth))
            else:
                stmts.append(self.op())
        return stmts

    def loop(self, depth: int) -> Loop:
        var = f"i{self.loop_count}"
        self.loop_count += 1
        kind = _pick(self.draw, ("affine", "sequential", "dynamic", "while", "scalar_offset"))
        start, stop, step = (self.draw(st.integers(-4, 64)) for _ in range(3))
        # a runtime loop's register (ir/runtime_loops.py): any access, as the text form allows; the verifier
        # checks that it is one integer element in SBUF
        reads = self.access() if kind in ("dynamic", "while", "scalar_offset") else None
        loc = self.loc()
        self.loops.append(var)
        body = self.body(depth + 1, 3)
        self.loops.pop()
        return Loop(kind, var, start, stop, step, body, loc, reads)

    def op(self) -> Op:
        draw = self.draw
        spec = _pick(draw, self.specs)
        operands = {}
        for o in spec.operands:
            if o.optional and draw(st.booleans()):
                continue
            if o.scalar and (not o.tile or draw(st.booleans())):
                operands[o.name] = Imm(draw(scalars))
            elif o.tile:
                operands[o.name] = self.access()
        # Drawn attributes beside the table's defaults (the parser completes omitted ones the same way), so a
        # generated op is one the tracer could have built and prints back to text that parses to the same op.
        drawn = {a.name: self.attr(a) for a in spec.attrs if a.default is ops.REQUIRED or draw(st.booleans())}
        attrs, _missing, _unknown = spec.complete_attrs(drawn)
        mask = _mask(draw, self.variables(2)) if draw(st.booleans()) else None
        loc = self.loc()
        result = None if spec.result is None else self.fresh_tensor(_tensor_type(draw), result_kind(spec))
        return Op(spec.name, operands, attrs, result, loc, mask)

    def access(self) -> Access:
        tensor = _pick(self.draw, self.tensors)
        if self.draw(st.booleans()):
            return tensor.full_access()
        shape = self.draw(shapes)
        index = tuple(_affine(self.draw, self.variables(len(shape))) for _ in tensor.type.shape)
        return Access(tensor, index, shape)

    def attr(self, spec: AttrSpec) -> object:
        """A value of the attribute's kind (``choices`` respected for str and fn attributes)."""
        draw, kind = self.draw, spec.kind
        if kind in ("str", "fn") and spec.choices:
            return _pick(draw, spec.choices)
        if kind in ("affine", "mask"):
            return (_affine if kind == "affine" else _mask)(draw, self.variables(3))
        if kind == "dtype":
            return _pick(draw, DTYPES)
        if kind == "fn":
            return _pick(draw, FN_NAMES)
        strategy = {"int": small_ints, "float": floats, "bool": st.booleans(), "str": texts, "ints": small_int_tuples,
                    "shape": shapes}[kind]  # fmt: skip
        return draw(strategy)


@st.composite
def kernels(draw, op_table: dict[str, OpSpec] | None = None) -> Kernel:
    """A random kernel using ops from ``op_table`` (default: the op table as it is when drawing)."""
    source_file = _pick(draw, FILES)
    grid = draw(st.lists(st.integers(1, 8), max_size=3).map(tuple))
    state = _KernelDraw(draw, dict(op_table or ops.OPS), source_file, grid)
    params = [state.fresh_tensor(_tensor_type(draw), "param") for _ in range(draw(st.integers(1, 3)))]
    body = state.body(0, 6)
    outputs = [_pick(draw, state.tensors) for _ in range(draw(st.integers(0, 2)))]
    return Kernel(
        name=_pick(draw, KERNEL_NAMES),
        params=params,
        body=body,
        outputs=outputs,
        grid=grid,
        source_file=source_file,
        constants=draw(st.dictionaries(texts, constants, max_size=3)),
    )
