"""Hostile IR the fuzzer found or the issue reported, each refused with an NkiError (never a raw exception)."""

from __future__ import annotations

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.errors import NkiError, NkiParseError, NkiVerificationError

BASE = """\
kernel k(%a: f32[128, 512] hbm) -> (%c) {
  grid ()
  source "k.py"
  %c = alloc() : f32[128, 512] hbm loc(2)
  %t = nl.load(src=%a) : f32[128, 512] sbuf loc(3)
  nl.store(dst=%c, value=%t) loc(4)
}
"""


def test_the_base_kernel_runs_on_every_backend():
    a = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    for backend in nki.backend_names():
        assert np.array_equal(nki.parse_ir(BASE).compile(backend=backend).run({"a": a}), a)


@pytest.mark.parametrize("data", ["not base64!", "\u00e9t\u00e9", "AAAA", "eJzLSM3JyQcABiwCFQ=="])
def test_shared_constant_data_that_is_not_the_tensor_is_a_compile_refusal(data):
    import json

    text = BASE.replace("  %t = nl.load(src=%a)", "  %k = nl.shared_constant() {data = " + json.dumps(data) + "} : "
                        "f32[128, 512] hbm loc(3)\n  %t = nl.load(src=%k)")  # fmt: skip
    traced = nki.parse_ir(text)
    for backend in nki.backend_names():
        with pytest.raises(NkiError, match="nl.shared_constant data"):
            traced.compile(backend=backend).run({"a": np.zeros((128, 512), np.float32)})


def test_a_second_name_for_an_axis_is_not_a_variable():
    with pytest.raises(NkiParseError, match="'d00' is not a variable"):
        nki.parse_ir(BASE.replace("nl.load(src=%a)", "nl.load(src=%a[d00, d1 ; 128x512])"))


def test_a_dma_between_unequal_shapes_is_a_verifier_refusal():
    text = BASE.replace("  %t = nl.load(src=%a) : f32[128, 512] sbuf loc(3)\n",
                        "  %t = alloc() : f32[128, 512] sbuf loc(3)\n"
                        "  nisa.dma_copy(dst=%t, src=%a[d0, d2 ; 128x8x512]) loc(3)\n")  # fmt: skip
    with pytest.raises(NkiVerificationError, match="does not fit the destination"):
        nki.parse_ir(text)


@pytest.mark.parametrize("space", ["\u2028", "\x85", "\u00a0", "\u3000", "\x0b"])
def test_whitespace_lark_does_not_ignore_is_a_syntax_error(space):
    with pytest.raises(NkiParseError, match="unexpected"):
        nki.parse_ir(BASE.replace("grid ()", f"grid ({space})"))


def test_nesting_past_the_interpreter_is_a_parse_error_even_under_a_loose_budget():
    depth = 400
    body = "".join(f"affine i{k} = range(0, 1, 1) loc(3) {{\n" for k in range(depth)) + "}" * depth
    text = BASE.replace("  %c = alloc()", body + "\n  %c = alloc()")
    with pytest.raises(NkiParseError, match="exhausts the parser"):
        nki.parse_ir(text, budget=nki.IRBudget(max_loop_depth=10**6))


@pytest.mark.parametrize("text", [b"kernel", None, 3])
def test_ir_text_must_be_a_string(text):
    with pytest.raises(NkiParseError, match="IR text must be a str"):
        nki.parse_ir(text)


def test_a_write_that_ignores_an_axis_is_a_verifier_refusal():
    text = BASE.replace("nl.store(dst=%c, value=%t)", "nl.store(dst=%c[3, d1 ; 128x512], value=%t)")
    with pytest.raises(NkiVerificationError, match="ignores axis d0 of extent 128: each element would be written 128"):
        nki.parse_ir(text)


def test_a_reshape_whose_attribute_is_not_its_result_shape_is_a_verifier_refusal():
    text = BASE.replace("  %t = nl.load(src=%a)",
                        "  %r = hbm.reshape(x=%a) {shape = (1,)} : f32[512, 128] hbm loc(3)\n  %t = nl.load(src=%a)")
    with pytest.raises(NkiVerificationError, match=r"attribute shape = \[1\] is not the shape of result"):
        nki.parse_ir(text)


def test_a_reduction_over_a_repeated_axis_is_a_verifier_refusal():
    text = BASE.replace("  nl.store(dst=%c, value=%t) loc(4)\n",
                        "  %s = nl.sum(x=%t) {axis = (1, 1), keepdims = true} : f32[128, 1] sbuf loc(4)\n"
                        "  nl.store(dst=%c, value=%t) loc(4)\n")  # fmt: skip
    with pytest.raises(NkiVerificationError, match=r"axis \[1, 1\] names an axis more than once"):
        nki.parse_ir(text)


WITH_ASSIGN = BASE.replace("  nl.store(dst=%c, value=%t) loc(4)\n",
                           "  %s = alloc() : f32[128, 512] sbuf loc(4)\n"
                           "  assign(dst=%s, src=%t)ATTRS loc(5)\n"
                           "  nl.store(dst=%c, value=%s) loc(6)\n")  # fmt: skip


def test_an_omitted_attribute_takes_the_op_tables_default_on_every_backend():
    # Found by the fuzzer: ``assign`` without its attribute block passed the verifier and the NumPy emitter then
    # raised a raw KeyError reading ``accumulate``.
    traced = nki.parse_ir(WITH_ASSIGN.replace("ATTRS", ""))
    assert "assign(dst=%s, src=%t) {accumulate = none} loc(5)" in traced.text
    a = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    for backend in nki.backend_names():
        assert np.array_equal(traced.compile(backend=backend).run({"a": a}), a)


def test_a_missing_required_attribute_is_a_verifier_refusal_at_its_line():
    text = BASE.replace("  %t = nl.load(src=%a)", "  %k = nl.shared_constant() : f32[128, 512] hbm loc(3)\n"
                        "  %t = nl.load(src=%k)")  # fmt: skip
    with pytest.raises(NkiVerificationError, match=r"k\.py:3.*nl\.shared_constant.*attribute 'data' is missing"):
        nki.parse_ir(text)


def test_an_op_built_without_a_defaulted_attribute_is_a_verifier_refusal():
    from nki_dsl.ir.nodes import Op
    from nki_dsl.passes.verifier import verify_kernel

    kernel = nki.parse_ir(WITH_ASSIGN.replace("ATTRS", "")).ir
    ops = [s for s in kernel.body if isinstance(s, Op) and s.name == "assign"]
    ops[0].attrs.clear()
    found = [str(d) for d in verify_kernel(kernel, nki.get_target("trn2"))]
    assert any("assign" in d and "attribute 'accumulate' is missing" in d for d in found), found


def test_a_second_alu_op_without_its_operand_is_a_verifier_refusal():
    # Found by the 1,000,000-input fuzz run (seed 1, input 167,330): op1 = subtract with no operand1 passed the
    # verifier and the NumPy emitter raised a raw KeyError reading operand1.
    text = BASE.replace("  nl.store(dst=%c, value=%t) loc(4)\n",
                        "  %u = nisa.tensor_scalar(data=%t, operand0=1.0) {op0 = multiply, op1 = subtract} "
                        ": f32[128, 512] sbuf loc(4)\n"
                        "  nl.store(dst=%c, value=%u) loc(5)\n")  # fmt: skip
    with pytest.raises(NkiVerificationError, match=r"k\.py:4.*operand 'operand1' is missing, and op1 = subtract"):
        nki.parse_ir(text)
    ok = nki.parse_ir(text.replace("op1 = subtract", "op1 = none"))
    a = np.ones((128, 512), np.float32)
    for backend in nki.backend_names():
        assert np.array_equal(ok.compile(backend=backend).run({"a": a}), a)


@pytest.mark.parametrize("loop", ["sequential i0 = range(3000000000, 3000000004, 1)",
                                  "affine i0 = range(-2147483649, 0, 1000000000)",
                                  "affine i0 = range(0, 4, 2147483648)"])  # fmt: skip
def test_a_loop_bound_past_a_32_bit_index_is_refused_before_any_backend_runs(loop):
    # found by the default fuzz run: NumPy ran such a loop (its index unused), XLA raised a raw OverflowError
    text = BASE.replace("  %t = nl.load(src=%a)", f"  {loop} loc(3) {{\n  }}\n  %t = nl.load(src=%a)")
    with pytest.raises(NkiVerificationError, match=r"k.py:3: .*must fit a signed 32-bit index"):
        nki.parse_ir(text)


def test_a_loop_bound_just_inside_a_32_bit_index_is_accepted():
    text = BASE.replace("  %t = nl.load(src=%a)", "  sequential i0 = range(2147483646, 2147483647, 1) loc(3) {\n  }\n"
                        "  %t = nl.load(src=%a)")  # fmt: skip
    a = np.ones((128, 512), np.float32)
    for backend in nki.backend_names():
        assert np.array_equal(nki.parse_ir(text).compile(backend=backend).run({"a": a}), a)
