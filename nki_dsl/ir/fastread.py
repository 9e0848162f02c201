"""A hand-written recursive-descent reader of ``grammar.lark``: the same parse trees lark builds, several times
faster, so a megabyte of IR text reads in well under a second (``benchmarks/ir_parse_speed.py``).

Lark stays the definition of the language and the author of syntax errors: this reader only ever accepts text
lark accepts, building the very tree shape lark would (rule names, inlined ``?rules``, token types), and gives up
(``FallbackError``) on anything it is not sure of — a syntax error, or a keyword run into a following word, which
lark's contextual lexer splits in ways not worth imitating. The parser then asks lark, which either reports the
error with its line, column and expected terminals or (for odd but valid text) builds the tree itself.

Tokens and nodes carry only their offset; ``line`` and ``column`` are computed on demand (error messages), so a
valid text costs one regex match per token and no line bookkeeping.
"""

from __future__ import annotations

import bisect
import re


class FallbackError(Exception):
    """This reader cannot vouch for the text; let lark parse it."""


class TooManyTermsError(Exception):
    """``(count, what, pos)``: an expression or mask longer than the reader's ``max_terms``, refused as soon as it
    is seen (a mask of 150,000 constraints is not read to its end)."""


class _Source:
    __slots__ = ("text", "_newlines")

    def __init__(self, text: str):
        self.text = text
        self._newlines: list[int] | None = None

    def line_col(self, pos: int) -> tuple[int, int]:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        k = bisect.bisect_left(self._newlines, pos)
        start = self._newlines[k - 1] + 1 if k else 0
        return k + 1, pos - start + 1


class Token:
    """A lark-compatible token: ``str()`` its text, ``type`` its terminal, ``line`` and ``column`` on demand."""

    __slots__ = ("type", "value", "pos", "src")

    def __init__(self, type_: str, value: str, pos: int, src: _Source):
        self.type, self.value, self.pos, self.src = type_, value, pos, src

    def __str__(self) -> str:
        return self.value

    @property
    def line(self) -> int:
        return self.src.line_col(self.pos)[0]

    @property
    def column(self) -> int:
        return self.src.line_col(self.pos)[1]


class Node:
    """A lark-compatible tree: ``data`` (the rule or alias), ``children``, ``line`` of its first token."""

    __slots__ = ("data", "children", "pos", "src")

    def __init__(self, data: str, children: list, pos: int, src: _Source):
        self.data, self.children, self.pos, self.src = data, children, pos, src

    @property
    def line(self) -> int:
        return self.src.line_col(self.pos)[0]


# Every pattern skips the whitespace lark ignores (common.WS) before its token; group 1 is the token.
_WS = "[ \t\f\r\n]*"
_P = {
    "NAME": re.compile(_WS + r"([^\W\d]\w*)"),
    "OPNAME": re.compile(_WS + r"([^\W\d]\w*(?:\.[^\W\d]\w*)*)"),
    "TENSOR": re.compile(_WS + r"(%\w+)"),
    "SYM": re.compile(_WS + r"(\$[A-Za-z_][A-Za-z0-9_]*)"),
    "INT": re.compile(_WS + r"([0-9]+)"),
    "DIMS": re.compile(_WS + r"([0-9]+(?:x[0-9]+)*)"),
    "STRING": re.compile(_WS + r'("(?:\\.|[^"\\\n])*")'),
    "CMP": re.compile(_WS + r"(>=|<=|==|>|<)"),
    # a value's first token: a float (lark's FLOAT has priority 2 over INT), an int, a word, or punctuation
    "VALUE": re.compile(_WS + r"([0-9]+\.[0-9]*(?:e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+|[0-9]+|[^\W\d]\w*|\S)"),
}
_SPACE = re.compile(_WS)
_LIT = {lit: re.compile(_WS + "(" + re.escape(lit) + ")") for lit in (
    "kernel", "grid", "source", "const", "range", "loc", "mask", "->", "{", "}", "(", ")", "[", "]", ",", ":", ";",
    "=", "-", "*", "%", '"', "symbol", "in", "//", "$", "reads", "step", "lnc")}  # fmt: skip
_WORD_CHAR = re.compile(r"\w")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+")
_VALUE_WORDS = {"true": "TRUE", "false": "FALSE", "inf": "INF", "nan": "NAN"}
MAX_NESTING = 64  # loops or tuples nested deeper go to lark (no recursion limit); the budget refuses them anyway


class Reader:
    def __init__(self, text: str, max_terms: int | None = None):
        self.max_terms = max_terms
        self.src = _Source(text)
        self.text = text
        self.pos = 0
        self.depth = 0

    # -- tokens ------------------------------------------------------------------------------------------------
    def _skip(self) -> int:
        self.pos = _SPACE.match(self.text, self.pos).end()
        return self.pos

    def tok(self, kind: str) -> Token:
        m = _P[kind].match(self.text, self.pos)
        if m is None:
            raise FallbackError
        self.pos = m.end()
        return Token(kind, m.group(1), m.start(1), self.src)

    def peek(self, lit: str) -> bool:
        return _LIT[lit].match(self.text, self.pos) is not None

    def peek_keyword(self, word: str) -> bool:
        m = _LIT[word].match(self.text, self.pos)
        return m is not None and _WORD_CHAR.match(self.text, m.end()) is None

    def accept(self, lit: str) -> bool:
        """Consume ``lit`` if it comes next."""
        m = _LIT[lit].match(self.text, self.pos)
        if m is None:
            return False
        self.pos = m.end()
        return True

    def lit(self, lit: str) -> int:
        m = _LIT[lit].match(self.text, self.pos)
        if m is None:
            raise FallbackError
        self.pos = m.end()
        return m.start(1)

    def keyword(self, word: str) -> int:
        pos = self.lit(word)
        if _WORD_CHAR.match(self.text, self.pos):  # "kernelx": lark's contextual lexer splits it; not our call
            raise FallbackError
        return pos

    def node(self, data: str, children: list, pos: int) -> Node:
        return Node(data, children, pos, self.src)

    # -- the grammar, rule by rule -----------------------------------------------------------------------------
    def start(self) -> Node:
        pos = self.keyword("kernel")
        name = self.tok("NAME")
        params = self.params()
        self.lit("->")
        outputs = self.outputs()
        self.lit("{")
        symbols = []
        while self.peek_keyword("symbol"):
            symbols.append(self.symbol())
        p = self.keyword("grid")
        grid = [self.node("grid", [self.tuple()], p)]
        if self.peek_keyword("lnc"):
            p = self.keyword("lnc")
            grid.append(self.node("lnc", [self.tok("INT")], p))
        p = self.keyword("source")
        source = self.node("source", [self.tok("STRING")], p)
        consts = []
        while self.peek_keyword("const"):
            p = self.keyword("const")
            key = self.tok("STRING")
            self.lit("=")
            consts.append(self.node("const", [key, self.value()], p))
        body = self.body()
        self.lit("}")
        if self._skip() != len(self.text):
            raise FallbackError
        return self.node("start", [name, params, outputs, *symbols, *grid, source, *consts, body], pos)

    def symbol(self) -> Node:
        """``symbol $N in [1, 65536]``, ``symbol $M in [128, 65536] step 128``, ``symbol $_0 = ($N + 127) // 128``
        or ``symbol $M = 2*$N``."""
        pos = self.keyword("symbol")
        name = self.tok("SYM")
        if self.peek_keyword("in"):
            self.keyword("in")
            self.lit("[")
            lo = self.tok("INT")
            self.lit(",")
            hi = self.tok("INT")
            self.lit("]")
            if self.peek_keyword("step"):
                self.keyword("step")
                return self.node("symbol_range", [name, lo, hi, self.tok("INT")], pos)
            return self.node("symbol_range", [name, lo, hi], pos)
        self.lit("=")
        if self.accept("("):
            e = self.expr()
            self.lit(")")
            self.lit("//")
            return self.node("symbol_floordiv", [name, e, self.tok("INT")], pos)
        return self.node("symbol_affine", [name, self.expr()], pos)

    def _sym_or(self, kind: str) -> Token:
        """A ``kind`` token, or where one is not, a shape symbol (tried second: concrete text pays nothing)."""
        m = _P[kind].match(self.text, self.pos)
        if m is None:
            return self.tok("SYM")
        self.pos = m.end()
        return Token(kind, m.group(1), m.start(1), self.src)

    def params(self) -> Node:
        pos = self.lit("(")
        items = []
        if not self.peek(")"):
            while True:
                t = self.tok("TENSOR")
                self.lit(":")
                items.append(self.node("param", [t, self.type()], t.pos))
                if not self.accept(","):
                    break
        self.lit(")")
        return self.node("params", items, pos)

    def outputs(self) -> Node:
        pos = self.lit("(")
        items = []
        if not self.peek(")"):
            items.append(self.tok("TENSOR"))
            while self.accept(","):
                items.append(self.tok("TENSOR"))
        self.lit(")")
        return self.node("outputs", items, pos)

    def body(self) -> Node:
        pos = self._skip()
        stmts = []
        text = self.text
        while True:
            p = self._skip()
            if p >= len(text):
                raise FallbackError
            c = text[p]
            if c == "}":
                return self.node("body", stmts, pos)
            if c == "%":
                result = self.tok("TENSOR")
                self.lit("=")
                call = self.call(self.tok("OPNAME"))
                self.lit(":")
                type_ = self.type()
                stmts.append(self.node("result_op", [result, call, type_, self.loc()], result.pos))
                continue
            word = self.tok("OPNAME")
            if word.value in ("affine", "sequential", "dynamic", "while", "scalar_offset"):
                stmts.append(self.loop(word))
            else:
                call = self.call(word)
                stmts.append(self.node("effect_op", [call, self.loc()], word.pos))

    def loop(self, kind: Token) -> Node:
        self._nest(1)
        kind.type = kind.value.upper()
        var = self.tok("NAME")
        self.lit("=")
        self.keyword("range")
        self.lit("(")
        start = self.signed()
        self.lit(",")
        stop = self.tok("SYM") if self.peek("$") else self.signed()
        self.lit(",")
        step = self.signed()
        self.lit(")")
        reads = []
        if self.peek_keyword("reads"):  # a runtime loop's register (ir/runtime_loops.py)
            pos = self.keyword("reads")
            t = self.tok("TENSOR")
            children = [t, self.view()] if self.peek("[") else [t]
            reads = [self.node("reads", [self.node("access", children, t.pos)], pos)]
        loc = self.loc()
        self.lit("{")
        body = self.body()
        self.lit("}")
        self._nest(-1)
        return self.node("loop", [kind, var, start, stop, step, *reads, loc, body], kind.pos)

    def _limit(self, n: int, what: str, pos: int) -> None:
        if self.max_terms is not None and n > self.max_terms:
            raise TooManyTermsError(n, what, pos)

    def _nest(self, step: int) -> None:
        self.depth += step
        if self.depth > MAX_NESTING:
            raise FallbackError

    def signed(self):
        if self.peek("-"):
            pos = self.lit("-")
            return self.node("neg_int", [self.tok("INT")], pos)
        return self.tok("INT")

    def call(self, name: Token) -> Node:
        name.type = "OPNAME"
        self.lit("(")
        parts = []
        if not self.peek(")"):
            while True:
                parts.append(self.operand())
                if not self.accept(","):
                    break
        self.lit(")")
        if self.peek("{"):
            pos = self.lit("{")
            attrs = []
            while True:
                n = self.tok("NAME")
                self.lit("=")
                attrs.append(self.node("attr", [n, self.value()], n.pos))
                if not self.accept(","):
                    break
            self.lit("}")
            parts.append(self.node("attrs", attrs, pos))
        if self.peek_keyword("mask"):
            pos = self.keyword("mask")
            parts.append(self.node("mask", [self.constraints()], pos))
        return self.node("call", [name, *parts], name.pos)

    def operand(self) -> Node:
        name = self.tok("NAME")
        self.lit("=")
        if self.peek("%"):
            t = self.tok("TENSOR")
            children = [t]
            if self.peek("["):
                children.append(self.view())
            value = self.node("access", children, t.pos)
        else:
            value = self.value()
        return self.node("operand", [name, value], name.pos)

    def view(self) -> Node:
        pos = self.lit("[")
        parts = []
        if not self.peek(";"):
            while True:
                parts.append(self.expr())
                if not self.accept(","):
                    break
        self.lit(";")
        if not self.peek("]"):
            parts.append(self.tok("DIMS"))
        self.lit("]")
        return self.node("view", parts, pos)

    def loc(self) -> Node:
        pos = self.keyword("loc")
        self.lit("(")
        children = []
        if self.peek('"'):
            children.append(self.tok("STRING"))
            self.lit(":")
        children.append(self.tok("INT"))
        self.lit(")")
        return self.node("loc", children, pos)

    def type(self) -> Node:
        dtype = self.tok("NAME")
        self.lit("[")
        dims = []
        if not self.peek("]"):
            while True:
                if self.peek("["):
                    pos = self.lit("[")
                    dims.append(self.node("par_dim", [self._sym_or("INT")], pos))
                    self.lit("]")
                else:
                    dims.append(self._sym_or("INT"))
                if not self.accept(","):
                    break
        self.lit("]")
        return self.node("type", [dtype, *dims, self.tok("NAME")], dtype.pos)

    # -- values ------------------------------------------------------------------------------------------------
    def value(self):
        pos = self._skip()
        text = self.text
        if pos >= len(text):
            raise FallbackError
        c = text[pos]
        if c == '"':
            return self.node("string", [self.tok("STRING")], pos)
        if c == "(":
            return self.tuple()
        if c == "[":
            return self.constraints()
        if c == "-":
            after = _SPACE.match(text, pos + 1).end()
            m = _FLOAT.match(text, after)
            if m is not None:
                self.pos = m.end()
                return self.node("neg_float", [Token("FLOAT", m.group(), after, self.src)], pos)
            m = _P["NAME"].match(text, after)
            if m is not None and m.group(1) in ("inf", "nan"):
                self.pos = m.end()
                return self.node("neg_float", [Token(m.group(1).upper(), m.group(1), m.start(1), self.src)], pos)
            return self.expr()
        m = _P["VALUE"].match(text, pos)
        if m is None:  # whitespace lark does not ignore (U+2028, U+0085, ...)
            raise FallbackError
        word = m.group(1)
        if _FLOAT.fullmatch(word):
            self.pos = m.end()
            return self.node("float", [Token("FLOAT", word, pos, self.src)], pos)
        keyword = _VALUE_WORDS.get(word)
        if keyword is not None:
            self.pos = m.end()
            if keyword in ("TRUE", "FALSE"):
                return self.node(word, [], pos)
            return self.node("float", [Token(keyword, word, pos, self.src)], pos)
        return self.expr()

    def tuple(self) -> Node:
        pos = self.lit("(")
        self._nest(1)
        items = []
        while not self.peek(")"):
            items.append(self.value())
            if not self.accept(","):
                break
        self.lit(")")
        self._nest(-1)
        return self.node("tuple", items, pos)

    def constraints(self) -> Node:
        pos = self.lit("[")
        items = []
        if not self.peek("]"):
            while True:
                lhs = self.expr()
                op = self.tok("CMP")
                items.append(self.node("constraint", [lhs, op, self.expr()], lhs.pos))
                if not self.accept(","):
                    break
                self._limit(len(items), "the constraints of a mask", pos)
        self.lit("]")
        return self.node("constraints", items, pos)

    def expr(self) -> Node:
        pos = self._skip()
        terms = []
        sign = "pos"
        if self.text.startswith("-", pos):
            self.pos = pos + 1
            sign = "neg"
        while True:
            p = self._skip()
            terms.append(self.node(sign, [self.atom()], p))
            self._limit(len(terms), "the terms of an expression", pos)
            p = self._skip()
            c = self.text[p : p + 1]
            if c == "+":
                sign = "pos"
            elif c == "-":
                sign = "neg"
            else:
                return self.node("expr", terms, pos)
            self.pos = p + 1

    def atom(self):
        m = _P["INT"].match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            n = Token("INT", m.group(1), m.start(1), self.src)
            if self.accept("*"):
                return self.node("scaled", [n, self._sym_or("NAME")], n.pos)
            return n
        return self._sym_or("NAME")
