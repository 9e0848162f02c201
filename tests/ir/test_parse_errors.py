"""Malformed or meaningless IR text fails with an NkiParseError naming the line (and the column, for syntax)."""

import pytest

from nki_dsl.errors import NkiParseError
from nki_dsl.ir.parser import parse_kernel

VALID = """\
kernel k(%a: f32[256, 512] hbm) -> (%c) {
  grid (2,)
  source "k.py"
  %c = alloc() : f32[256, 512] hbm loc(4)
  affine i0 = range(0, 2, 1) loc(5) {
    %t = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(6)
    %u = nl.add(x=%t, y=1.5) : f32[128, 512] sbuf loc(7)
    nl.store(dst=%c[d0 + 128*i0, d1 ; 128x512], value=%u) loc(8)
  }
}
"""


def parse_error(old: str, new: str) -> NkiParseError:
    assert old in VALID
    with pytest.raises(NkiParseError) as info:
        parse_kernel(VALID.replace(old, new, 1), "bundle/k.nkir")
    return info.value


def test_the_base_text_parses():
    assert parse_kernel(VALID).name == "k"


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [("(src=%a[", "(src=%a[[", 6, "unexpected '[' at column 25; expected '-', ';', a name, an integer"),
     ("y=1.5)", "y=1.5", 7, "unexpected ':' at column 29; expected ')', ','"),
     ("loc(8)", "loc(8) $", 8,
      "unexpected '$' at column 66; expected 'affine', 'dynamic', 'scalar_offset', 'sequential', 'while', '}', "
      "a tensor"),
     ("sbuf loc(6)", "sbuf", 7, "unexpected '%u' at column 5; expected 'loc'"),
     ("  }\n}\n", "  }\n", 9,
      "unexpected end of text at column 3; expected 'affine', 'dynamic', 'scalar_offset', 'sequential', 'while', '}'"),
     ("}\n", "}\n}\n", 11, "unexpected '}' at column 1; expected the end of the text"),
     ('source "k.py"', "source k.py", 3, "unexpected 'k.py' at column 10; expected a string"),
     ("128x512]) :", "128 512]) :", 6, "unexpected '512' at column 47; expected ']'"),
     ("kernel k", "kernal k", 1, "unexpected 'kernal' at column 1; expected 'kernel'")],
)  # fmt: skip
def test_syntax_errors_name_line_column_and_what_was_expected(old, new, line, message):
    error = parse_error(old, new)
    assert error.loc.line == line
    assert str(error).startswith(f"k.nkir:{line}: {message}")


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [("nl.add(", "nl.plus(", 7, "nl.plus: unknown op; it is not in the op table"),
     ("value=%u", "value=%v", 8, "nl.store: tensor %v is used before it is defined"),
     ("(x=%t,", "(x=%u,", 7, "nl.add: tensor %u is used before it is defined"),
     ("-> (%c)", "-> (%out)", 1, "tensor %out is used before it is defined"),
     ("%u = nl.add", "%t = nl.add", 7, "nl.add: tensor %t is defined twice"),
     ("%c = alloc", "%a = alloc", 4, "alloc: tensor %a is defined twice"),
     ("(x=%t, y=1.5)", "(x=%t, z=1.5)", 7, "nl.add: unknown operand 'z'; the op table lists: x, y"),
     ("(x=%t, y=1.5)", "(x=%t, x=%t)", 7, "operand 'x' is given twice"),
     ("y=1.5)", 'y="1.5")', 7, "expected a tensor or a number for operand 'y'"),
     ("y=1.5)", "y=d0)", 7, "expected a tensor or a number for operand 'y'"),
     ("y=1.5)", "y=1.5) {axis = (1,)}", 7, "nl.add: unknown attribute 'axis'; the op table lists: none"),
     ("alloc() :", "nl.full() {value = 0} :", 4, "nl.full: attribute 'value': expected a float"),
     ("alloc() :", "nl.full() {value = 1.0, value = 2.0} :", 4, "attribute 'value' is given twice"),
     (": f32[128, 512] sbuf loc(6)", ": f64[128, 512] sbuf loc(6)", 6, "unknown dtype 'f64'; expected one of: f32"),
     (": f32[128, 512] sbuf loc(6)", ": f32[128, 512] dram loc(6)", 6, "unknown buffer 'dram'; expected one of"),
     (": f32[128, 512] sbuf loc(6)", ": f32[[4], [128]] sbuf loc(6)", 6, "more than one partition dimension"),
     ("%a[d0 + 128*i0", "%a[x0 + 128*i0", 6, "'x0' is not a variable; expected i<N>, pid<N> or d<N>"),
     ("%a[d0 + 128*i0", "%a[d0 + 128*j", 6, "'j' is not a variable"),
     ("affine i0 =", "affine d0 =", 5, "loop index d0 is not a loop variable i<N>"),
     ("affine i0 =", "affine q =", 5, "'q' is not a variable"),
     ('source "k.py"', 'source "k\\q.py"', 3, 'bad string literal at column 10: Invalid \\escape'),
     ("grid (2,)", "grid (2, d0)", 2, "expected a tuple of ints for the grid"),
     ('  source "k.py"\n', '  source "k.py"\n  const "a" = 1\n  const "a" = 2\n', 5, "constant 'a' is given twice"),
     ('  source "k.py"\n', '  source "k.py"\n  const "a" = exp\n', 4, "a number, string, bool, none or tuple"),
     ('  source "k.py"\n', '  source "k.py"\n  const "a" = [d0 >= 0]\n', 4, "a number, string, bool, none")],
)  # fmt: skip
def test_meaning_errors_name_the_line_and_the_op(old, new, line, message):
    error = parse_error(old, new)
    assert error.loc.line == line
    assert str(error).startswith(f"k.nkir:{line}: ")
    assert message in str(error)


def test_comparisons_accept_every_direction_and_normalise():
    text = VALID.replace("value=%u) loc(8)", "value=%u) mask[d0 + 128*i0 < 250, 3 <= d1, d1 == 7] loc(8)")
    store = parse_kernel(text).body[1].body[2]
    assert [str(c) for c in store.mask.constraints] == ["-d0 - 128*i0 + 249", "-d1 + 7", "d1 - 3", "d1 - 7"]


def test_whitespace_is_free_but_printing_restores_the_layout():
    from nki_dsl.ir.printer import print_kernel

    squashed = " ".join(VALID.split()).replace("d0 + 128*i0", "d0+128 * i0")
    assert print_kernel(parse_kernel(squashed)) == VALID
