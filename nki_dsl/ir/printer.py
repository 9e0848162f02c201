"""Print a Kernel as IR text, the form the Hub ships and golden tests keep; ``parser.parse_kernel`` inverts it.

The layout is canonical, so equal kernels print identically::

    kernel add_kernel(%a: f32[256, 512] hbm, %b: f32[256, 512] hbm) -> (%c) {
      grid (2,)
      source "examples/add.py"
      const "TILE" = 128
      %c = alloc() : f32[256, 512] hbm loc(4)
      affine i0 = range(0, 2, 1) loc(5) {
        %0 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(6)
        %1 = nl.exp(x=%0) mask[d0 + 128*i0 <= 200] : f32[128, 512] sbuf loc("lib/ops.py":12)
        nl.store(dst=%c[d0 + 128*i0, d1 ; 128x512], value=%1) loc(7)
      }
    }

A shape family (``ir/symbols.py``) declares its symbols first, and uses them as sizes and in masks::

    kernel softmax_kernel(%x: f32[$N, 512] hbm) -> (%out) {
      symbol $N in [1, 65536]
      symbol $M in [128, 65536] step 128
      symbol $_0 = ($N + 127) // 128
      grid ()
      ...
      affine i0 = range(0, $_0, 1) loc(16) {
        %0 = nl.load(src=%x[d0 + 128*i0, d1 ; 128x512]) mask[d0 + 128*i0 - $N <= -1] : f32[128, 512] sbuf loc(18)

Operands and attributes follow the op table's order; a loc names the kernel's source file unless it shows its own.
A tensor's kind is not printed: it follows from where the tensor is defined (see ``result_kind``).
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

from nki_dsl import dtypes
from nki_dsl.errors import NkiError, SourceLoc
from nki_dsl.ir.affine import SYMBOL_RE, Affine, Mask, format_affine, format_constraint, var_kind
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Operand, Tensor
from nki_dsl.ir.ops import DECLARED, OPS, AttrKind, OpSpec
from nki_dsl.ir.strings import describe_char, unsafe_char
from nki_dsl.ir.symbols import SymbolDef, format_definition
from nki_dsl.ir.types import Buffer, TensorType

INDENT = "  "
LOOP_KINDS = ("affine", "sequential", "dynamic", "while", "scalar_offset")  # the last three: ir/runtime_loops.py
# These patterns match the NAME, OPNAME and TENSOR terminals of grammar.lark.
IDENT = re.compile(r"[^\W\d]\w*")
OP_NAME = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")
TENSOR_NAME = re.compile(r"\w+")
VALUE_KEYWORDS = ("true", "false", "inf", "nan")  # words a value cannot use as a dtype or function name


class NkiPrintError(NkiError):
    """The IR holds something the text form cannot express (a malformed IR, not a user mistake)."""


class _FormatError(Exception):
    """Raised by the formatters; ``_context`` adds where in the kernel it happened."""


def result_kind(spec: OpSpec) -> str:
    """The kind of the tensor an op defines: allocations declare storage, other ops produce a fresh tile."""
    return "alloc" if spec.result is DECLARED else "tile"


def print_kernel(kernel: Kernel) -> str:
    return "\n".join(_kernel_lines(kernel)) + "\n"


@contextmanager
def _context(what: str = "", loc: SourceLoc | None = None, op: str | None = None):
    """Turn a formatter's complaint into an NkiPrintError naming the part of the kernel being printed."""
    try:
        yield
    except _FormatError as e:
        raise NkiPrintError(f"{what}{e}", loc, op) from None


def _kernel_lines(kernel: Kernel):
    with _context("kernel header: "):
        if not IDENT.fullmatch(kernel.name):
            raise _FormatError(f"kernel name {kernel.name!r} is not an identifier")
        params = ", ".join(_param(p) for p in kernel.params)
        outputs = ", ".join(_tensor_ref(t) for t in kernel.outputs)
        header = [
            f"kernel {kernel.name}({params}) -> ({outputs}) {{",
            *(f"{INDENT}{_symbol(s)}" for s in kernel.symbols.values()),
            f"{INDENT}grid {_tuple([str(_int(g)) for g in kernel.grid])}",
            *([f"{INDENT}lnc {_int(kernel.lnc)}"] if kernel.lnc != 1 else []),
            f"{INDENT}source {_string(kernel.source_file)}",
            *(f"{INDENT}const {_string(k)} = {_constant(v)}" for k, v in kernel.constants.items()),
        ]
    yield from header
    yield from _body_lines(kernel.body, 1, kernel.source_file)
    yield "}"


def _symbol(s: SymbolDef) -> str:
    _expect(isinstance(s, SymbolDef) and SYMBOL_RE.fullmatch(s.name) is not None, s, "a symbol definition")
    if s.is_base:
        step = f" step {_size(s.step)}" if s.step != 1 else ""
        return f"symbol {s.name} in [{_size(s.lo)}, {_size(s.hi)}]{step}"
    _affine(s.expr)
    _size(s.divisor)
    return f"symbol {s.name} = {format_definition(s)}"


def _param(tensor: Tensor) -> str:
    if tensor.kind != "param":
        raise _FormatError(f"parameter %{tensor.name} has kind {tensor.kind!r}, not 'param'")
    return f"{_tensor_ref(tensor)}: {format_type(tensor.type)}"


def _body_lines(body: list, depth: int, source_file: str):
    pad = INDENT * depth
    for stmt in body:
        if isinstance(stmt, Loop):
            with _context(f"loop {stmt.var}: ", stmt.loc):
                header = _loop_header(stmt, source_file)
            yield pad + header
            yield from _body_lines(stmt.body, depth + 1, source_file)
            yield pad + "}"
        else:
            with _context(loc=stmt.loc, op=stmt.name):
                line = _op_line(stmt, source_file)
            yield pad + line


def _loop_header(loop: Loop, source_file: str) -> str:
    if loop.kind not in LOOP_KINDS:
        raise _FormatError(f"kind {loop.kind!r} is not one of {', '.join(LOOP_KINDS)}")
    if not re.fullmatch(r"i\d+", loop.var):
        raise _FormatError(f"index {loop.var!r} is not a loop variable i<N>")
    stop = _dim(loop.stop) if isinstance(loop.stop, str) else str(_int(loop.stop))  # a family's stop: a symbol
    bounds = f"{_int(loop.start)}, {stop}, {_int(loop.step)}"
    if (loop.reads is not None) != (loop.kind in LOOP_KINDS[2:]):
        raise _FormatError(f"a {loop.kind} loop {'must' if loop.reads is None else 'cannot'} read a register")
    if loop.reads is not None and not isinstance(loop.reads, Access):
        raise _FormatError(f"register {loop.reads!r} is not a tensor access")
    reads = f" reads {format_operand(loop.reads)}" if loop.reads is not None else ""
    return f"{loop.kind} {loop.var} = range({bounds}){reads} {_loc(loop.loc, source_file)} {{"


def _op_line(op: Op, source_file: str) -> str:
    spec = OPS.get(op.name)
    if spec is None or not OP_NAME.fullmatch(op.name):
        raise _FormatError("not in the op table")
    text = _call(op, spec)
    if op.result is not None:
        if op.result.kind != result_kind(spec):
            raise _FormatError(f"result %{op.result.name} has kind {op.result.kind!r}, "
                               f"but this op defines a {result_kind(spec)!r}")  # fmt: skip
        text = f"{_tensor_ref(op.result)} = {text} : {format_type(op.result.type)}"
    return f"{text} {_loc(op.loc, source_file)}"


def _call(op: Op, spec: OpSpec) -> str:
    operand_order = [o.name for o in spec.operands]
    attr_order = [a.name for a in spec.attrs]
    _check_names("operand", op.operands, operand_order)
    _check_names("attribute", op.attrs, attr_order)
    operands = ", ".join(f"{n}={format_operand(op.operands[n])}" for n in operand_order if n in op.operands)
    text = f"{op.name}({operands})"
    if op.attrs:
        attrs = (f"{a.name} = {format_attr(a.kind, op.attrs[a.name])}" for a in spec.attrs if a.name in op.attrs)
        text += " {" + ", ".join(attrs) + "}"
    if op.mask is not None:
        text += " mask" + _mask(op.mask)
    return text


def _check_names(what: str, given: dict, allowed: list[str]) -> None:
    unknown = [n for n in given if n not in allowed]
    if unknown:
        raise _FormatError(f"unknown {what} {unknown[0]!r}; the op table lists: {', '.join(allowed) or 'none'}")


def _loc(loc: SourceLoc, source_file: str) -> str:
    line = _size(loc.line)
    return f"loc({line})" if loc.file == source_file else f"loc({_string(loc.file)}:{line})"


# -- types and operands ----------------------------------------------------------------------------------------


def format_type(t: TensorType) -> str:
    """``f32[256, 512] hbm``; a partition dimension other than the first is bracketed: ``f32[4, [128], 512] sbuf``."""
    _expect(isinstance(t.dtype, str) and t.dtype in dtypes.BY_NAME, t.dtype, "a dtype name")
    if not isinstance(t.buffer, Buffer):
        raise _FormatError(f"buffer {t.buffer!r} is not a Buffer")
    if t.shape and not 0 <= t.par_axis < len(t.shape) or not t.shape and t.par_axis != 0:
        raise _FormatError(f"partition axis {t.par_axis} is out of range for shape {list(t.shape)}")
    dims = [_dim(s) for s in t.shape]
    if t.par_axis:
        dims[t.par_axis] = f"[{dims[t.par_axis]}]"
    return f"{dtypes.get(t.dtype).short}[{', '.join(dims)}] {t.buffer.value}"


def format_operand(operand: Operand) -> str:
    """``%t`` for a whole tensor, ``%t[d0 + 128*i0, d1 ; 128x512]`` for a view, or a number."""
    if isinstance(operand, Imm):
        return _scalar(operand.value)
    if not isinstance(operand, Access):
        raise _FormatError(f"operand {operand!r} is neither an access nor an immediate")
    if operand.is_full:
        return _tensor_ref(operand.tensor)
    index = ", ".join(_affine(e) for e in operand.index)
    shape = "x".join(str(_size(s)) for s in operand.shape)
    return f"{_tensor_ref(operand.tensor)}[{f'{index} ; {shape}'.strip()}]"  # a scalar view prints [3 ;]


def _tensor_ref(tensor: Tensor) -> str:
    if not TENSOR_NAME.fullmatch(tensor.name):
        raise _FormatError(f"tensor name {tensor.name!r} is not made of letters, digits and '_'")
    return f"%{tensor.name}"


# -- literals ----------------------------------------------------------------------------------------------------


def _affine(e: Affine) -> str:
    _expect(isinstance(e, Affine), e, "an affine expression")
    for v in e.vars():
        _expect(_is_var(v), v, "a variable name (i<N>, pid<N>, d<N> or a $symbol)")
    return format_affine(e)


def _is_var(name: str) -> bool:
    try:
        var_kind(name)
    except ValueError:
        return False
    return True


def _mask(mask: Mask) -> str:
    for c in mask.constraints:
        _affine(c)
    return "[" + ", ".join(format_constraint(c) for c in mask.constraints) + "]"


def _scalar(v: object) -> str:
    """An immediate: ``true``/``false``, an int, or a float by ``repr`` (so ``inf``, ``nan`` and ``-0.0`` survive)."""
    if isinstance(v, bool):
        return _attr_bool(v)
    if isinstance(v, int):
        return str(v)
    _expect(isinstance(v, float), v, "a number or a bool")
    return _attr_float(v)


def _constant(v: object) -> str:
    if v is None:
        return "none"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, tuple):
        return _tuple([_constant(x) for x in v])
    return _scalar(v)


def _string(s: object) -> str:
    _expect(isinstance(s, str), s, "a string")
    bad = unsafe_char(s)
    if bad is not None:  # the parser refuses these (IR strings are printable text), so the printer does too
        raise _FormatError(f"string {s!r} holds {describe_char(bad[1])}; IR strings hold printable text only")
    # JSON escapes keep the text ASCII-only and on one line; the parser decodes with json.loads.
    return json.dumps(s)


def _tuple(items: list[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


# -- attribute values, by AttrSpec.kind --------------------------------------------------------------------------


def format_attr(kind: AttrKind, value: object) -> str:
    formatter = ATTR_FORMATS.get(kind)
    if formatter is None:
        raise _FormatError(f"attribute kind {kind!r} has no text form")
    return formatter(value)


def _expect(ok: bool, value: object, what: str) -> None:
    if not ok:
        raise _FormatError(f"{value!r} is not {what}")


def _int(v: object) -> int:
    _expect(isinstance(v, int) and not isinstance(v, bool), v, "an int")
    return v


def _dim(v: object) -> str:
    """A size: an int >= 0, or (in a shape family) a symbol name."""
    if isinstance(v, str):
        _expect(SYMBOL_RE.fullmatch(v) is not None, v, "a size or a symbol name")
        return v
    return str(_size(v))


def _size(v: object) -> int:
    _expect(_int(v) >= 0, v, "a size (an int >= 0)")
    return v


def _attr_int(v) -> str:
    return str(_int(v))


def _attr_float(v) -> str:
    _expect(isinstance(v, float), v, "a float")
    return repr(float(v))  # float(): a NumPy float64 subclass would repr as "np.float64(...)"


def _attr_bool(v) -> str:
    _expect(isinstance(v, bool), v, "a bool")
    return "true" if v else "false"


def _attr_dtype(v) -> str:
    _expect(isinstance(v, str) and v in dtypes.BY_NAME, v, "a dtype name")
    return dtypes.get(v).short


def _attr_ints(v) -> str:
    """Ints; in a shape family, a reshape's shape may also name symbols (``($M, 6, 128)``)."""
    _expect(isinstance(v, tuple), v, "a tuple of ints")
    return _tuple([_dim(x) if isinstance(x, str) else str(_int(x)) for x in v])


def _attr_shape(v) -> str:
    _expect(isinstance(v, tuple), v, "a shape tuple")
    return _tuple([str(_size(x)) for x in v])


def _attr_fn(v) -> str:
    _expect(isinstance(v, str) and IDENT.fullmatch(v) and v not in VALUE_KEYWORDS, v, "a function name")
    return v


def _attr_mask(v) -> str:
    _expect(isinstance(v, Mask), v, "a mask")
    return _mask(v)


ATTR_FORMATS = {
    AttrKind.INT: _attr_int,
    AttrKind.FLOAT: _attr_float,
    AttrKind.BOOL: _attr_bool,
    AttrKind.STR: _string,
    AttrKind.DTYPE: _attr_dtype,
    AttrKind.INTS: _attr_ints,
    AttrKind.SHAPE: _attr_shape,
    AttrKind.FN: _attr_fn,
    AttrKind.AFFINE: _affine,
    AttrKind.MASK: _attr_mask,
}
