"""Printer and parser on hand-built kernels: the exact text, and print(parse(print(k))) == print(k)."""

import math
import subprocess
import sys

import numpy as np
import pytest

from nki_dsl.errors import SourceLoc
from nki_dsl.ir.affine import Affine, Mask, compare
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Tensor
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import NkiPrintError, print_kernel
from nki_dsl.ir.types import Buffer, TensorType

from .support import structure, unlinked_tensors

pytestmark = pytest.mark.usefixtures("every_kind_op")
FILE = "kernels/k.py"
i0, i2, d0, d1 = (Affine.var(v) for v in ("i0", "i2", "d0", "d1"))


def roundtrip(kernel: Kernel) -> str:
    text = print_kernel(kernel)
    parsed = parse_kernel(text)
    assert print_kernel(parsed) == text
    assert structure(parsed) == structure(kernel)
    assert unlinked_tensors(parsed) == []
    return text


def hbm(name: str, shape=(256, 512), dtype="float32") -> Tensor:
    return Tensor(name, TensorType(shape, dtype, Buffer.HBM), "param")


def tile(name: str, shape=(128, 512), dtype="float32", buffer=Buffer.SBUF, par_axis=0) -> Tensor:
    return Tensor(name, TensorType(shape, dtype, buffer, par_axis), "tile")


def sbuf_param(name: str) -> Tensor:
    return Tensor(name, TensorType((128, 512), "float32", Buffer.SBUF), "param")


def op(name, operands=None, attrs=None, result=None, line=1, mask=None, file=FILE) -> Op:
    return Op(name, operands or {}, attrs or {}, result, SourceLoc(file, line), mask)


def kernel(params, body, outputs=(), **kw) -> Kernel:
    return Kernel("k", list(params), body, list(outputs), source_file=FILE, **kw)


def body_lines(text: str) -> list[str]:
    """The statement lines: everything after the header's grid/source/const lines, without the closing brace."""
    lines = text.splitlines()[1:-1]
    return [line for line in lines if not line.startswith(("  grid ", "  source ", "  const "))]


def every_kind_op(x: Tensor, **attrs) -> Op:
    values = {
        "int": -3,
        "float": 0.1,
        "bool": True,
        "str": 'say "hi" \\ é',
        "dtype": "bfloat16",
        "ints": (1, -2),
        "shape": (128,),
        "fn": "gelu_apprx_tanh",
        "affine": 128 * i0 + d0 - 1,
        "mask": compare(d0, "<", Affine.of(100)) & compare(d1, ">=", i0),
    }
    return op("test.every_kind", {"x": x.full_access(), "s": Imm(2)}, {**values, **attrs})


def test_a_small_kernel_prints_as_documented():
    a, c = hbm("a"), Tensor("c", TensorType((256, 512), "float32", Buffer.HBM), "alloc")
    t0 = tile("0")
    view = (d0 + 128 * i0, d1)
    body = [
        op("alloc", result=c, line=4),
        Loop("affine", "i0", 0, 2, 1, [
            op("nl.load", {"src": Access(a, view, (128, 512))}, result=t0, line=6),
            op("nl.store", {"dst": Access(c, view, (128, 512)), "value": t0.full_access()}, line=7),
        ], SourceLoc(FILE, 5)),
    ]  # fmt: skip
    text = roundtrip(kernel([a], body, [c], grid=(2,), constants={"TILE": 128}))
    assert text == (
        "kernel k(%a: f32[256, 512] hbm) -> (%c) {\n"
        "  grid (2,)\n"
        '  source "kernels/k.py"\n'
        '  const "TILE" = 128\n'
        "  %c = alloc() : f32[256, 512] hbm loc(4)\n"
        "  affine i0 = range(0, 2, 1) loc(5) {\n"
        "    %0 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(6)\n"
        "    nl.store(dst=%c[d0 + 128*i0, d1 ; 128x512], value=%0) loc(7)\n"
        "  }\n"
        "}\n"
    )


def test_every_attribute_kind():
    x = tile("x")
    text = roundtrip(kernel([hbm("a")], [op("nl.copy", {"x": hbm("a").full_access()}, result=x), every_kind_op(x)]))
    assert body_lines(text)[1] == (
        '  test.every_kind(x=%x, s=2) {int = -3, float = 0.1, bool = true, str = "say \\"hi\\" \\\\ \\u00e9", '
        'dtype = bf16, '
        "ints = (1, -2), shape = (128,), fn = gelu_apprx_tanh, affine = d0 + 128*i0 - 1, "
        "mask = [d0 <= 99, d1 - i0 >= 0]} loc(1)"
    )


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -0.0, 5e-324, 1e16, 1.5e-7, 2.0**60])
def test_float_attributes_round_trip_exactly(value):
    a = hbm("a")
    text = roundtrip(kernel([a], [op("nl.full", attrs={"value": value}, result=Tensor("z", a.type, "alloc"))]))
    assert f"{{value = {value!r}}}" in text


@pytest.mark.parametrize("value", [np.float64(0.1), np.float64(-0.0), np.float64(np.inf), np.float64(2.0**60)])
def test_numpy_float_attributes_and_immediates_print_as_plain_floats(value):
    """Hand-built IR may hold NumPy floats (a float subclass); they print, and parse back, as the Python float."""
    a = hbm("a")
    body = [op("nl.full", attrs={"value": value}, result=Tensor("z", a.type, "alloc")),
            op("nl.add", {"x": a.full_access(), "y": Imm(value)}, result=tile("t"), line=2)]  # fmt: skip
    text = print_kernel(kernel([a], body))
    assert f"{{value = {float(value)!r}}}" in text and f"y={float(value)!r})" in text
    assert "np." not in text
    again = parse_kernel(text)
    assert print_kernel(again) == text
    assert repr(again.body[0].attrs["value"]) == repr(float(value))


@pytest.mark.parametrize(
    ("kind", "value", "printed"),
    [("ints", (), "()"), ("ints", (7,), "(7,)"), ("shape", (), "()"), ("str", "", '""'),
     ("str", "é\U0001f600", '"\\u00e9\\ud83d\\ude00"'), ("fn", "none", "none"), ("affine", Affine.of(-4), "-4"),
     ("affine", -d0, "-d0"), ("mask", Mask.of(), "[]")],
)  # fmt: skip
def test_attribute_edge_values(kind, value, printed):
    x = sbuf_param("x")
    text = roundtrip(kernel([x], [every_kind_op(x, **{kind: value})]))
    assert f"{kind} = {printed}" in text


def test_masks_print_readably_and_parse_either_direction():
    a, t = hbm("a"), tile("t")
    mask = compare(d0 + 128 * i0, "<", Affine.of(250)) & compare(d1, ">=", Affine.of(3)) & Mask.of(Affine.of(5))
    body = [Loop("sequential", "i0", 0, 2, 1, [op("nl.exp", {"x": a.full_access()}, result=t, mask=mask)],
                 SourceLoc(FILE, 2))]  # fmt: skip
    text = roundtrip(kernel([a], body))
    assert "mask[d0 + 128*i0 <= 249, 0 >= -5, d1 >= 3]" in text
    flipped = text.replace("mask[d0 + 128*i0 <= 249, 0 >= -5, d1 >= 3]", "mask[250 > 128*i0 + d0, 3 <= d1, 5 >= 0]")
    assert print_kernel(parse_kernel(flipped)) == text


def test_an_empty_mask_differs_from_no_mask():
    a = hbm("a")
    text = roundtrip(kernel([a], [op("nl.exp", {"x": a.full_access()}, result=tile("t"), mask=Mask.of())]))
    assert "nl.exp(x=%a) mask[] :" in text


def test_nested_loops_of_both_kinds():
    a, acc = hbm("a"), Tensor("acc", TensorType((128, 512), "float32", Buffer.PSUM), "alloc")
    inner = Loop("affine", "i2", -2, 10, 3, [
        op("assign", {"dst": acc.full_access(), "src": Access(a, (d0 + i0, 4 * i2 + d1), (128, 512))},
           {"accumulate": "add"}, line=9),
    ], SourceLoc(FILE, 8))  # fmt: skip
    middle = Loop("sequential", "i1", 0, 4, 1, [inner, Loop("affine", "i3", 0, 0, 1, [], SourceLoc(FILE, 10))],
                  SourceLoc(FILE, 7))  # fmt: skip
    body = [op("nl.full", attrs={"value": 0.0}, result=acc),
            Loop("affine", "i0", 0, 2, 1, [middle], SourceLoc(FILE, 6))]  # fmt: skip
    text = roundtrip(kernel([a], body))
    assert body_lines(text)[1:] == [
        "  affine i0 = range(0, 2, 1) loc(6) {",
        "    sequential i1 = range(0, 4, 1) loc(7) {",
        "      affine i2 = range(-2, 10, 3) loc(8) {",
        "        assign(dst=%acc, src=%a[d0 + i0, d1 + 4*i2 ; 128x512]) {accumulate = add} loc(9)",
        "      }",
        "      affine i3 = range(0, 0, 1) loc(10) {",
        "      }",
        "    }",
        "  }",
    ]


@pytest.mark.parametrize(
    ("shape", "par_axis", "printed"),
    [((4, 128, 512), 1, "f32[4, [128], 512] sbuf"), ((128, 512), 0, "f32[128, 512] sbuf"),
     ((2, 3, 128), 2, "f32[2, 3, [128]] sbuf"), ((), 0, "f32[] sbuf")],
)  # fmt: skip
def test_partition_axis(shape, par_axis, printed):
    t = tile("t", shape=shape, par_axis=par_axis)
    alloc = Tensor("t", t.type, "alloc")
    text = roundtrip(kernel([hbm("a")], [op("alloc", result=alloc)]))
    assert f"%t = alloc() : {printed} loc(1)" in text


@pytest.mark.parametrize(
    ("value", "printed"),
    [(2, "2"), (-7, "-7"), (0.5, "0.5"), (-1e-05, "-1e-05"), (math.inf, "inf"), (-math.inf, "-inf"),
     (math.nan, "nan"), (True, "true"), (False, "false"), (1.0, "1.0")],
)  # fmt: skip
def test_immediate_operands(value, printed):
    a = hbm("a")
    text = roundtrip(kernel([a], [op("nl.add", {"x": a.full_access(), "y": Imm(value)}, result=tile("t"))]))
    assert f"nl.add(x=%a, y={printed})" in text


def test_views_full_partial_and_scalar():
    a = hbm("a", shape=(4, 8))
    views = [
        a.full_access(),
        Access(a, (d0, d1), (4, 8)),  # the identity view is the whole tensor: printed as %a
        Access(a, (d1, d0), (8, 4)),
        Access(a, (Affine.var("pid0"), 3 - d0), (2,)),
        Access(a, (Affine.of(1), Affine.of(2)), ()),
    ]
    body = [op("nl.copy", {"x": v}, result=tile(f"t{k}")) for k, v in enumerate(views)]
    text = roundtrip(kernel([a], body, grid=(4,)))
    assert [line.split("(x=")[1].split(") :")[0] for line in body_lines(text)] == [
        "%a", "%a", "%a[d1, d0 ; 8x4]", "%a[pid0, -d0 + 3 ; 2]", "%a[1, 2 ;]"
    ]  # fmt: skip


def test_outputs_grid_and_constants():
    a, b = hbm("a"), hbm("b")
    out = Tensor("c_output", a.type, "alloc")
    constants = {
        "TILE": 128, "scale": 0.125, "eps": 1e-06, "big": math.inf, "none": None, "flag": False, "name": "vit",
        "tuple": (1, (2.5, "x"), ()), "single": (None,), "weird key\\\"": math.nan, "": -0.0,
    }  # fmt: skip
    text = roundtrip(kernel([a, b], [op("alloc", result=out)], [out, a], grid=(2, 3), constants=constants))
    header = text.splitlines()[:13]
    assert header == [
        "kernel k(%a: f32[256, 512] hbm, %b: f32[256, 512] hbm) -> (%c_output, %a) {",
        "  grid (2, 3)",
        '  source "kernels/k.py"',
        '  const "TILE" = 128',
        '  const "scale" = 0.125',
        '  const "eps" = 1e-06',
        '  const "big" = inf',
        '  const "none" = none',
        '  const "flag" = false',
        '  const "name" = "vit"',
        '  const "tuple" = (1, (2.5, "x"), ())',
        '  const "single" = (none,)',
        '  const "weird key\\\\\\"" = nan',
    ]


def test_empty_kernel():
    text = roundtrip(Kernel("empty", [], [], []))
    assert text == 'kernel empty() -> () {\n  grid ()\n  source "<unknown>"\n}\n'


def test_locations_in_other_files():
    a = hbm("a")
    body = [
        op("nl.exp", {"x": a.full_access()}, result=tile("t0"), line=3),
        op("nl.exp", {"x": a.full_access()}, result=tile("t1"), line=12, file="lib/activations.py"),
        Loop("affine", "i0", 0, 1, 1, [], SourceLoc("other dir/ü.py", 0)),
    ]
    lines = body_lines(roundtrip(kernel([a], body)))
    assert lines[0].endswith(" loc(3)")
    assert lines[1].endswith(' loc("lib/activations.py":12)')
    assert lines[2] == '  affine i0 = range(0, 1, 1) loc("other dir/\\u00fc.py":0) {'


def test_operands_and_attributes_print_in_spec_order():
    x = sbuf_param("x")
    reordered = every_kind_op(x)
    reordered.operands = {"opt": x.full_access(), "s": Imm(1), "x": x.full_access()}
    reordered.attrs = dict(reversed(reordered.attrs.items()))
    line = body_lines(roundtrip(kernel([x], [reordered])))[0]
    assert line.startswith("  test.every_kind(x=%x, s=1, opt=%x) {int = -3, float = 0.1,")


# -- printer errors -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value"),
    [("int", 1.0), ("int", True), ("float", 1), ("bool", 1), ("str", b"x"), ("dtype", "f32"), ("ints", [1]),
     ("ints", 1), ("ints", (1.0,)), ("shape", (-1,)), ("fn", "not a name"), ("fn", "inf"), ("affine", 3),
     ("affine", Affine.var("x0")), ("mask", compare(d0, ">=", Affine.of(0)).constraints)],
)  # fmt: skip
def test_printer_rejects_attribute_values_of_the_wrong_kind(kind, value):
    x = sbuf_param("x")
    with pytest.raises(NkiPrintError, match=r"k\.py:1: test\.every_kind: .* is not "):
        print_kernel(kernel([x], [every_kind_op(x, **{kind: value})]))


@pytest.mark.parametrize(
    ("stmt", "message"),
    [(op("nl.nope"), "nl.nope: not in the op table"),
     (op("nl.exp", {"y": Imm(1)}), "unknown operand 'y'"),
     (op("nl.exp", attrs={"axis": (1,)}), "unknown attribute 'axis'"),
     (op("nl.exp", {"x": Imm(1j)}), "is not a number or a bool"),
     (op("nl.exp", result=Tensor("r", TensorType((1,), "float32", Buffer.SBUF), "alloc")), "kind 'alloc'"),
     (op("nl.exp", result=Tensor("r.1", TensorType((1,), "float32", Buffer.SBUF), "tile")), "tensor name"),
     (op("nl.exp", result=tile("r", par_axis=2)), "partition axis 2 is out of range"),
     (op("nl.exp", result=tile("r", dtype="float64")), "is not a dtype name"),
     (op("nl.exp", {"x": Access(hbm("a"), (Affine.var("j"),), (1,))}), "is not a variable name"),
     (Loop("parallel", "i0", 0, 1, 1, [], SourceLoc(FILE, 3)), "loop i0: kind 'parallel'"),
     (Loop("affine", "d0", 0, 1, 1, [], SourceLoc(FILE, 3)), "is not a loop variable")],
)  # fmt: skip
def test_printer_rejects_ir_the_text_cannot_express(stmt, message):
    with pytest.raises(NkiPrintError, match=message):
        print_kernel(kernel([hbm("a")], [stmt]))


def test_printer_rejects_bad_header_values():
    with pytest.raises(NkiPrintError, match="kernel header: .* is not a number"):
        print_kernel(kernel([], [], constants={"x": [1]}))
    with pytest.raises(NkiPrintError, match="has kind 'tile', not 'param'"):
        print_kernel(kernel([tile("t")], []))
    with pytest.raises(NkiPrintError, match="not an identifier"):
        print_kernel(Kernel("my kernel", [], [], []))


# -- tables and imports -------------------------------------------------------------------------------------------


def test_importing_the_parser_does_not_import_lark():
    code = "import sys, nki_dsl.ir.parser, nki_dsl.ir.printer; assert 'lark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
