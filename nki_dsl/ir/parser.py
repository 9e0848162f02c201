"""Parse IR text (``grammar.lark``) into a Kernel: the exact inverse of ``printer.print_kernel``.

IR text arrives from outside (Hub bundles), so the parser checks everything it builds: every op, operand and
attribute name is in the op table; each attribute value has its spec's kind; a tensor is defined once (a parameter,
or the result of an op) before it is used, in program order. Scope, shape and hardware rules are the verifier's
job; it runs on every parsed kernel.

The parser is also the first line of the untrusted-input defence (``IRBudget``): it refuses text over the size
budget before lark sees it, strings that are not printable text (``strings.py``) or too long, integers beyond 64
bits, and expressions, value nesting, loop nesting and op counts over their budgets while it builds, so building
stays linear in the text and never recurses deeper than the budget.

The parse tree comes from ``fastread.Reader`` (a hand-written reader of the same grammar, several times faster
than lark) and, for anything it leaves to lark (syntax errors above all), from lark, which reports the error.
"""

from __future__ import annotations

import functools
import gc
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nki_dsl import dtypes
from nki_dsl.errors import NkiParseError, SourceLoc
from nki_dsl.ir import runtime_loops
from nki_dsl.ir.affine import Affine, Mask, compare, var_kind
from nki_dsl.ir.budget import DEFAULT_BUDGET, IRBudget, refuse
from nki_dsl.ir.fastread import FallbackError, Reader, TooManyTermsError
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Operand, Stmt, Tensor
from nki_dsl.ir.ops import OPS, AttrKind, OpSpec
from nki_dsl.ir.printer import result_kind
from nki_dsl.ir.strings import describe_char, unsafe_char
from nki_dsl.ir.symbols import SymbolDef, SymbolError, check_symbol
from nki_dsl.ir.types import Buffer, TensorType

_GRAMMAR = Path(__file__).with_name("grammar.lark")

# How syntax errors name the grammar's pattern terminals; literal terminals show their text.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "OPNAME": "an op name",
    "TENSOR": "a tensor (%name)",
    "SYM": "a shape symbol ($name)",
    "INT": "an integer",
    "FLOAT": "a float",
    "DIMS": "a shape (128x512)",
    "STRING": "a string",
    "CMP": "a comparison",
    "$END": "the end of the text",
}


@functools.cache
def _lark():
    import lark  # deferred: importing nki_dsl must not pay for building the parser

    return lark.Lark(_GRAMMAR.read_text(), parser="lalr", propagate_positions=True)


INT_DIGITS = 18  # IR integers stay below 10**18 < 2**63: sizes, offsets and coefficients of real kernels are far less


def parse_kernel(text: str, path: str = "<nkir>", budget: IRBudget | None = None) -> Kernel:
    """Parse one kernel. ``path`` names the text in error messages (e.g. the bundle file it came from); ``budget``
    bounds what the text may ask for (default ``IRBudget()``)."""
    from lark.exceptions import UnexpectedInput

    budget = DEFAULT_BUDGET if budget is None else budget
    if not isinstance(text, str):
        raise NkiParseError(f"IR text must be a str, not {type(text).__name__}", SourceLoc(path, 0))
    size = len(text) if len(text) > budget.max_text_bytes else len(text.encode("utf-8", "surrogatepass"))
    if size > budget.max_text_bytes:
        raise refuse("max_text_bytes", size, budget.max_text_bytes, "the IR text's size in bytes", SourceLoc(path, 0))
    # Parsing allocates many small objects that all live until it ends: the cyclic collector would rescan them
    # again and again (half the parse time of a large text, and superlinear).
    enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            tree = Reader(text, budget.max_expression_terms).start()
        except TooManyTermsError as e:
            n, what, pos = e.args
            line = text.count("\n", 0, pos) + 1
            raise refuse("max_expression_terms", n, budget.max_expression_terms, f"{what} (at least)",
                         SourceLoc(path, line)) from None  # fmt: skip
        except FallbackError:  # a syntax error, or text the fast reader leaves to lark: lark decides and explains
            try:
                tree = _lark().parse(text)
            except UnexpectedInput as e:
                raise _syntax_error(e, path, _DECLARES_SYMBOLS.search(text) is not None) from None
        return _Builder(path, budget).kernel(tree)
    except (RecursionError, MemoryError) as e:  # only under budgets far looser than the defaults
        raise NkiParseError(f"the IR text exhausts the parser ({type(e).__name__}); tighten the IRBudget "
                            f"(max_loop_depth, max_value_depth, max_text_bytes)", SourceLoc(path, 0)) from None
    finally:
        if enabled:
            gc.enable()


# A text that declares no shape symbol cannot use one, so its syntax errors do not offer "a shape symbol" as what
# was expected (nor do they differ from the errors before shape families existed).
_DECLARES_SYMBOLS = re.compile(r"^\s*symbol\s", re.MULTILINE)


def _syntax_error(e, path: str, symbols: bool = True) -> NkiParseError:
    token = getattr(e, "token", None)
    if token is None:
        found = repr(e.char)
    elif token.type == "$END":
        found = "end of text"
    else:
        found = repr(str(token))
    message = f"unexpected {found} at column {e.column}"
    # accepts() replays the parser on each terminal: exact, where the LALR tables' lookahead sets are a superset.
    interactive = getattr(e, "interactive_parser", None)
    expected = interactive.accepts() if interactive is not None else getattr(e, "expected", None)
    if not symbols and expected:
        expected = {t for t in expected if t != "SYM"}
    if expected:
        message += "; expected " + ", ".join(sorted(_describe_terminal(t) for t in expected))
    return NkiParseError(message, SourceLoc(path, e.line))


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    pattern = _lark().get_terminal(name).pattern
    return repr(pattern.value) if pattern.type == "str" else name


class _MeaningError(Exception):
    """Well-formed text that means nothing valid; ``_Builder._at`` adds the line and the op."""


@dataclass(frozen=True)
class _Word:
    """A bare name in a value: a dtype or function name, ``none``, or a lone affine variable."""

    text: str


class _Builder:
    """Builds the Kernel from the parse tree top-down, so tensors are defined and used in program order."""

    def __init__(self, path: str, budget: IRBudget):
        self.path = path
        self.budget = budget
        self.tensors: dict[str, Tensor] = {}
        self.source_file = ""
        self.statements = 0
        self.depth = 0
        self.symbols: dict[str, SymbolDef] = {}
        self._intervals: dict[str, tuple[int, int]] = {}  # each symbol's (symbols.check_symbol)

    @contextmanager
    def _at(self, node, op: str | None = None):
        try:
            yield
        except _MeaningError as e:
            raise NkiParseError(str(e), SourceLoc(self.path, _line(node)), op) from None
        except _BudgetError as e:
            field, value, limit, what = e.args
            raise refuse(field, value, limit, what, SourceLoc(self.path, _line(node)), op or "kernel") from None

    def kernel(self, tree) -> Kernel:
        name, params, outputs, *rest = tree.children
        symbols = [n for n in rest if n.data.startswith("symbol_")]
        grid, *rest = rest[len(symbols):]
        lnc = rest.pop(0) if rest[0].data == "lnc" else None
        source, *consts, body = rest
        for node in symbols:  # first: parameter types use them
            self._symbol(node)
        with self._at(source):
            self.source_file = self._string(source.children[0])
        kernel = Kernel(str(name), [self._param(p) for p in params.children], [], [], source_file=self.source_file,
                        symbols=self.symbols)  # fmt: skip
        with self._at(grid):
            kernel.grid = _ints(self._value(grid.children[0]), "the grid")
            if len(kernel.grid) > self.budget.max_grid_rank:
                raise _BudgetError("max_grid_rank", len(kernel.grid), self.budget.max_grid_rank, "the grid's rank")
        if lnc is not None:
            with self._at(lnc):
                kernel.lnc = _int(lnc.children[0])
                if kernel.lnc != 2 or tuple(kernel.grid) != (2,):
                    raise _MeaningError(f"lnc {kernel.lnc} with grid {kernel.grid}: an LNC launch runs on 2 "
                                        f"NeuronCores, its grid (2,) (a kernel on one core has no lnc line)")
        for const in consts:
            with self._at(const):
                key, value = const.children
                key = self._string(key)
                if key in kernel.constants:
                    raise _MeaningError(f"constant {key!r} is given twice")
                kernel.constants[key] = _constant(self._value(value))
        kernel.body = self._body(body)
        for out in outputs.children:
            with self._at(out):
                kernel.outputs.append(self._use(out))
        return kernel

    def _symbol(self, node) -> None:
        """One ``symbol`` line: checked against the ones before it (``symbols.check_symbol``)."""
        self._count(node)
        with self._at(node):
            name, *parts = node.children
            if str(name) in self.symbols:
                raise _MeaningError(f"symbol {name} is declared twice")
            if node.data == "symbol_range":
                s = SymbolDef(str(name), _int(parts[0]), _int(parts[1]), step=_int(parts[2]) if len(parts) > 2 else 1)
            else:
                expr = _affine(self._expr(parts[0]))
                s = SymbolDef(str(name), expr=expr, divisor=_int(parts[1]) if len(parts) > 1 else 1)
            try:
                check_symbol(s, self.symbols, self._intervals)
            except SymbolError as e:
                raise _MeaningError(str(e)) from None
            self.symbols[s.name] = s

    def _declared(self, token) -> str:
        if str(token) not in self.symbols:
            raise _MeaningError(f"shape symbol {token} is not declared (symbol {token} in [lo, hi])")
        return str(token)

    def _param(self, node) -> Tensor:
        with self._at(node):
            name, type_node = node.children
            return self._define(name, self._type(type_node), "param")

    def _type(self, node) -> TensorType:
        for d in node.children[1:-1]:
            token = d.children[0] if getattr(d, "data", None) == "par_dim" else d
            if token.type == "SYM":
                self._declared(token)
        return _type(node)

    def _define(self, token, type_: TensorType, kind: str) -> Tensor:
        name = str(token)[1:]
        if name in self.tensors:
            raise _MeaningError(f"tensor %{name} is defined twice")
        tensor = self.tensors[name] = Tensor(name, type_, kind)
        return tensor

    def _use(self, token) -> Tensor:
        tensor = self.tensors.get(str(token)[1:])
        if tensor is None:
            raise _MeaningError(f"tensor {token} is used before it is defined")
        return tensor

    def _body(self, node) -> list[Stmt]:
        return [self._loop(s) if s.data == "loop" else self._op(s) for s in node.children]

    def _count(self, node) -> None:
        self.statements += 1
        if self.statements > self.budget.max_ops:
            with self._at(node):
                raise _BudgetError("max_ops", self.statements, self.budget.max_ops, "the number of ops and loops")

    def _loop(self, node) -> Loop:
        kind, var, start, stop, step, *reads, loc, body = node.children
        self._count(node)
        with self._at(node):
            if self.depth + 1 > self.budget.max_loop_depth:
                raise _BudgetError("max_loop_depth", self.depth + 1, self.budget.max_loop_depth,
                                   f"loop {var}'s nesting depth")  # fmt: skip
            if _var(var) != "loop":
                raise _MeaningError(f"loop index {var} is not a loop variable i<N>")
            stop = self._declared(stop) if getattr(stop, "type", None) == "SYM" else _signed(stop)
            register = self._access(reads[0].children[0]) if reads else None
            loop = Loop(str(kind), str(var), _signed(start), stop, _signed(step), [], self._loc(loc), register)
            problem = runtime_loops.pairing_problem(loop)
            if problem is not None:
                raise _MeaningError(f"loop {var}: {problem}")
        self.depth += 1
        loop.body = self._body(body)
        self.depth -= 1
        return loop

    def _op(self, node) -> Op:
        if node.data == "result_op":
            result, call, type_node, loc = node.children
        else:
            (call, loc), result, type_node = node.children, None, None
        name, *parts = call.children
        spec = OPS.get(str(name))
        self._count(node)
        with self._at(node, str(name)):
            if spec is None:
                raise _MeaningError("unknown op; it is not in the op table")
            operands = self._operands(spec, [p for p in parts if p.data == "operand"])
            attrs = self._attrs(spec, [a for p in parts if p.data == "attrs" for a in p.children])
            mask = next((self._mask(p.children[0]) for p in parts if p.data == "mask"), None)
            if result is not None:
                result = self._define(result, self._type(type_node), result_kind(spec))
            return Op(spec.name, operands, attrs, result, self._loc(loc), mask)

    def _operands(self, spec: OpSpec, nodes) -> dict[str, Operand]:
        given: dict[str, Operand] = {}
        for node in nodes:
            name, value = node.children
            name = _spec_name("operand", [o.name for o in spec.operands], name, given)
            given[name] = self._access(value) if value.data == "access" else _immediate(self._value(value), name)
        return {o.name: given[o.name] for o in spec.operands if o.name in given}

    def _access(self, node) -> Access:
        tensor = self._use(node.children[0])
        if len(node.children) == 1:
            return tensor.full_access()
        parts = node.children[1].children
        dims = parts[-1] if parts and getattr(parts[-1], "type", None) == "DIMS" else None
        index = tuple(_affine(self._expr(e)) for e in parts if e is not dims)
        shape = tuple(_int(dims, s) for s in str(dims).split("x")) if dims is not None else ()
        return Access(tensor, index, shape)

    def _loc(self, node) -> SourceLoc:
        if len(node.children) == 1:
            return SourceLoc(self.source_file, _int(node.children[0]))
        file, line = node.children
        return SourceLoc(self._string(file), _int(line))

    def _attrs(self, spec: OpSpec, nodes) -> dict[str, object]:
        given: dict[str, object] = {}
        for node in nodes:
            name, value = node.children
            name = _spec_name("attribute", [a.name for a in spec.attrs], name, given)
            try:
                given[name] = ATTR_PARSERS[spec.attr(name).kind](self._value(value))
            except _MeaningError as e:
                raise _MeaningError(f"attribute {name!r}: {e}") from None
        # Text may leave out an attribute block or some of its entries: they take the op table's defaults, exactly
        # as the tracer fills them in, so every later stage sees complete ops. A missing required attribute stays
        # missing, for the verifier to refuse with the op's location.
        complete, _missing, _unknown = spec.complete_attrs(given)
        return complete

    # -- strings, values and expressions, under the budget ---------------------------------------------------------

    def _string(self, token) -> str:
        text = str(token)
        if len(text) - 2 > self.budget.max_string_chars:  # escapes only shorten a string: a cheap first bound
            value = _decode(token)
            if len(value) > self.budget.max_string_chars:
                raise _BudgetError("max_string_chars", len(value), self.budget.max_string_chars,
                                   f"the string at column {token.column}'s length")  # fmt: skip
        else:
            value = _decode(token)
        bad = unsafe_char(value)
        if bad is not None:
            raise _MeaningError(f"the string at column {token.column} holds {describe_char(bad[1])} at character "
                                f"{bad[0]}; IR strings hold printable text only")  # fmt: skip
        return value

    def _value(self, node, depth: int = 0):
        """A Python value: int, float, bool, str, tuple, Mask, ``_Word`` (bare name) or Affine."""
        kind = node.data
        if kind == "expr":
            return self._expr(node)
        if kind in ("float", "neg_float"):
            value = float(str(node.children[0]))
            return -value if kind == "neg_float" else value
        if kind == "string":
            return self._string(node.children[0])
        if kind in ("true", "false"):
            return kind == "true"
        if kind == "tuple":
            if depth + 1 > self.budget.max_value_depth:
                raise _BudgetError("max_value_depth", depth + 1, self.budget.max_value_depth, "a tuple's nesting depth")
            return tuple(self._value(c, depth + 1) for c in node.children)
        return self._mask(node)

    def _terms(self, n: int, what: str) -> None:
        if n > self.budget.max_expression_terms:
            raise _BudgetError("max_expression_terms", n, self.budget.max_expression_terms, what)

    def _expr(self, node) -> int | _Word | Affine:
        """A lone integer stays an int and a lone name a ``_Word``; anything longer is an Affine."""
        self._terms(len(node.children), "the terms of an expression")
        terms = [(t.data == "neg", t.children[0]) for t in node.children]
        if len(terms) == 1:
            negative, atom = terms[0]
            if getattr(atom, "type", None) == "INT":
                return -_int(atom) if negative else _int(atom)
            if getattr(atom, "type", None) == "NAME" and not negative:
                return _Word(str(atom))
        coefs: dict[str, int] = {}  # summed in one dict: Affine addition copies, so a chain of them is quadratic
        const = 0
        for negative, atom in terms:
            sign = -1 if negative else 1
            if getattr(atom, "data", None) == "scaled":
                coef, name = atom.children
                if _var(name) == "sym":
                    self._declared(name)
                coefs[str(name)] = coefs.get(str(name), 0) + sign * _int(coef)
            elif atom.type == "INT":
                const += sign * _int(atom)
            else:
                if _var(atom) == "sym":
                    self._declared(atom)
                coefs[str(atom)] = coefs.get(str(atom), 0) + sign
        return Affine.of(const, **coefs)

    def _mask(self, node) -> Mask:
        self._terms(len(node.children), "the constraints of a mask")
        constraints: list[Affine] = []
        for c in node.children:
            lhs, op, rhs = c.children
            constraints += compare(_affine(self._expr(lhs)), str(op), _affine(self._expr(rhs))).constraints
        return Mask.of(*constraints)


class _BudgetError(Exception):
    """``(field, value, limit, what)`` of an exceeded budget; ``_Builder._at`` adds the line and the op."""


def _line(node) -> int:
    return node.line if hasattr(node, "line") else node.meta.line


def _int(token, text: str | None = None) -> int:
    """An INT token (or ``text``, a part of the DIMS ``token``) as an int, at most ``INT_DIGITS`` digits long."""
    text = str(token) if text is None else text
    if len(text) > INT_DIGITS:
        raise _MeaningError(f"the integer at column {token.column} has {len(text)} digits; IR integers have at "
                            f"most {INT_DIGITS}")  # fmt: skip
    return int(text)


def _spec_name(what: str, allowed: list[str], token, given: dict) -> str:
    name = str(token)
    if name not in allowed:
        raise _MeaningError(f"unknown {what} {name!r}; the op table lists: {', '.join(allowed) or 'none'}")
    if name in given:
        raise _MeaningError(f"{what} {name!r} is given twice")
    return name


_BUFFERS = {b.value: b for b in Buffer}


def _type(node) -> TensorType:
    dtype, *dims, buffer = node.children
    if str(dtype) not in dtypes.BY_SHORT:
        raise _MeaningError(f"unknown dtype {str(dtype)!r}; expected one of: {', '.join(dtypes.BY_SHORT)}")
    if str(buffer) not in _BUFFERS:
        raise _MeaningError(f"unknown buffer {str(buffer)!r}; expected one of: {', '.join(_BUFFERS)}")
    par = [k for k, d in enumerate(dims) if getattr(d, "data", None) == "par_dim"]
    if len(par) > 1:
        raise _MeaningError("a type marks more than one partition dimension")
    shape = tuple(_dim(d.children[0] if k in par else d) for k, d in enumerate(dims))
    return TensorType(shape, dtypes.BY_SHORT[str(dtype)].name, _BUFFERS[str(buffer)], par[0] if par else 0)


def _dim(token) -> int | str:
    """A size, or a shape symbol (declared: ``_Builder._type`` checked)."""
    return str(token) if token.type == "SYM" else _int(token)


def _signed(node) -> int:
    return -_int(node.children[0]) if getattr(node, "data", None) == "neg_int" else _int(node)


def _decode(token) -> str:
    """A STRING token's value, decoded as JSON (the printer encodes with ``json.dumps``). Errors quote no text: it
    may hold terminal escapes."""
    try:
        return json.loads(str(token))
    except json.JSONDecodeError as e:
        raise _MeaningError(f"bad string literal at column {token.column}: {e.msg} at character {e.pos}") from None


# -- values: one syntax, converted by what the context expects --------------------------------------------------


def _var(name) -> str:
    try:
        return var_kind(str(name))
    except ValueError:
        raise _MeaningError(f"{str(name)!r} is not a variable; expected i<N>, pid<N> or d<N>") from None


def _affine(value) -> Affine:
    if isinstance(value, Affine):
        return value
    if isinstance(value, _Word):
        _var(value.text)
        return Affine.var(value.text)
    _want(isinstance(value, int) and not isinstance(value, bool), "an affine expression")
    return Affine.of(value)


def _want(ok: bool, what: str) -> None:
    if not ok:
        raise _MeaningError(f"expected {what}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v, what: str) -> tuple[int, ...]:
    _want(isinstance(v, tuple) and all(_is_int(x) for x in v), f"a tuple of ints for {what}")
    return v


def _immediate(v, operand: str) -> Imm:
    _want(isinstance(v, int | float), f"a tensor or a number for operand {operand!r}")
    return Imm(v)


def _constant(v):
    if isinstance(v, _Word) and v.text == "none":
        return None
    if isinstance(v, tuple):
        return tuple(_constant(x) for x in v)
    _want(isinstance(v, int | float | str), "a number, string, bool, none or tuple as the constant's value")
    return v


def _word(v, names, what: str) -> str:
    _want(isinstance(v, _Word) and v.text in names, what)
    return v.text


def _attr_int(v):
    _want(_is_int(v), "an int")
    return v


def _attr_float(v):
    _want(isinstance(v, float), "a float (written with a '.', an exponent, inf or nan)")
    return v


def _attr_bool(v):
    _want(isinstance(v, bool), "true or false")
    return v


def _attr_str(v):
    _want(isinstance(v, str), "a quoted string")
    return v


def _attr_dtype(v):
    return dtypes.BY_SHORT[_word(v, dtypes.BY_SHORT, f"a dtype, one of: {', '.join(dtypes.BY_SHORT)}")].name


def _attr_ints(v):
    """Ints; a shape family's symbol (declared: ``_expr`` checked) stands for a size (``hbm.reshape``'s shape; the
    family verifier refuses it anywhere else)."""
    if isinstance(v, tuple):
        v = tuple(_symbol_name(x) or x for x in v)
    _want(isinstance(v, tuple) and all(_is_int(x) or isinstance(x, str) for x in v), "a tuple of ints for the value")
    return v


def _symbol_name(x) -> str | None:
    """``$M`` for the expression ``$M`` alone."""
    if isinstance(x, Affine) and x.const == 0 and len(x.terms) == 1 and x.terms[0][1] == 1:
        name = x.terms[0][0]
        return name if _var(name) == "sym" else None
    return None


def _attr_shape(v):
    _want(isinstance(v, tuple) and all(_is_int(x) and x >= 0 for x in v), "a shape (a tuple of sizes)")
    return v


def _attr_fn(v):
    _want(isinstance(v, _Word), "a function name")
    return v.text


def _attr_mask(v):
    _want(isinstance(v, Mask), "a mask [constraint, ...]")
    return v


ATTR_PARSERS = {
    AttrKind.INT: _attr_int,
    AttrKind.FLOAT: _attr_float,
    AttrKind.BOOL: _attr_bool,
    AttrKind.STR: _attr_str,
    AttrKind.DTYPE: _attr_dtype,
    AttrKind.INTS: _attr_ints,
    AttrKind.SHAPE: _attr_shape,
    AttrKind.FN: _attr_fn,
    AttrKind.AFFINE: _affine,
    AttrKind.MASK: _attr_mask,
}
