"""Runtime loops (nki_dsl/ir/runtime_loops.py) in IR from outside: the text must give a runtime loop its register,
the ``structure`` rule checks the register and the declared bound, the budgets count the declared bound (so a Hub
IR can never ask for an unbounded or huge loop), and every other rule works over the declared range. Goldens name
file:line; each refusal has an accepted counterpart."""

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.backends.numpy_ref import compile_kernel
from nki_dsl.errors import NkiParseError, NkiRuntimeError, NkiVerificationError
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes.verifier import verify_kernel

DYNAMIC = """\
kernel k(%a: f32[128, 512] hbm, %n: i32[1, 1] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %r = alloc() : i32[1, 1] sbuf loc(4)
  nisa.dma_copy(dst=%r, src=%n) loc(5)
  dynamic i0 = range(0, 4, 1) reads %r[0, 0 ; 1x1] loc(6) {
    %t = alloc() : f32[128, 128] sbuf loc(7)
    nisa.dma_copy(dst=%t, src=%a[d0, d1 + 128*i0 ; 128x128]) loc(8)
    nisa.dma_copy(dst=%0[d0, d1 + 128*i0 ; 128x128], src=%t) loc(9)
  }
}
"""

WHILE = """\
kernel k(%a: f32[128, 64] hbm, %n: i32[1, 1] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 64] shared_hbm loc(3)
  %r = alloc() : i32[1, 1] sbuf loc(4)
  nisa.dma_copy(dst=%r, src=%n) loc(5)
  %t = alloc() : f32[128, 64] sbuf loc(6)
  nisa.dma_copy(dst=%t, src=%a) loc(7)
  while i0 = range(0, 8, 1) reads %r loc(8) {
    %1 = nisa.tensor_scalar(data=%t, operand0=2.0) {op0 = multiply} : f32[128, 64] sbuf loc(9)
    assign(dst=%t, src=%1) {accumulate = none} loc(9)
    %2 = nisa.tensor_scalar(data=%r, operand0=1) {op0 = subtract} : i32[1, 1] sbuf loc(10)
    assign(dst=%r, src=%2) {accumulate = none} loc(10)
  }
  nisa.dma_copy(dst=%0, src=%t) loc(11)
}
"""

OFFSET = """\
kernel k(%a: f32[512, 64] hbm, %n: i32[1, 1] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 64] shared_hbm loc(3)
  %r = alloc() : i32[1, 1] sbuf loc(4)
  nisa.dma_copy(dst=%r, src=%n) loc(5)
  %t = alloc() : f32[128, 64] sbuf loc(6)
  scalar_offset i0 = range(0, 385, 1) reads %r loc(7) {
    nisa.dma_copy(dst=%t, src=%a[d0 + i0, d1 ; 128x64]) loc(7)
  }
  nisa.dma_copy(dst=%0, src=%t) loc(8)
}
"""

TRN2 = nki.get_target("trn2")
A = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)


def test_valid_runtime_loops_are_accepted_and_run():
    for text in (DYNAMIC, WHILE):
        assert verify_kernel(parse_kernel(text), TRN2) == []
    run = compile_kernel(parse_kernel(DYNAMIC)).run
    out = run({"a": A, "n": np.array([[3]], np.int32)})
    np.testing.assert_array_equal(out[:, :384], A[:, :384])
    assert np.isnan(out[:, 384:]).all()  # never written (shared HBM starts as poison on the reference)
    out = compile_kernel(parse_kernel(WHILE)).run({"a": A[:, :64], "n": np.array([[5]], np.int32)})
    np.testing.assert_array_equal(out, A[:, :64] * 32)


@pytest.mark.parametrize("text, value", [(DYNAMIC, 5), (WHILE, 9)])
def test_a_register_past_the_declared_bound_is_refused_at_run_time(text, value):
    run = compile_kernel(parse_kernel(text)).run
    with pytest.raises(NkiRuntimeError) as info:
        run({"a": A[:, :128 * 4 if text is DYNAMIC else 64], "n": np.array([[value]], np.int32)})
    kind = "dynamic_range" if text is DYNAMIC else "while_loop"
    assert str(info.value).startswith(f"k.py:{6 if text is DYNAMIC else 8}: nl.{kind}: the nl.{kind} loop i0 ")
    assert (f"read stop {value} from its register" if text is DYNAMIC else "(1) after 8 iterations") in str(info.value)


@pytest.mark.parametrize("old, new, message", [
    (" reads %r[0, 0 ; 1x1]", "", "k.nkir:7: loop i0: a dynamic loop must read its stop from a register"),
    ("dynamic i0", "affine i0", "k.nkir:7: loop i0: a affine loop reads no register"),
    (" reads %r[0, 0 ; 1x1]", " reads %q[0, 0 ; 1x1]", "k.nkir:7: tensor %q is used before it is defined"),
])  # fmt: skip
def test_text_without_a_register_or_with_a_stray_one_does_not_parse(old, new, message):
    with pytest.raises(NkiParseError) as info:
        parse_kernel(DYNAMIC.replace(old, new), "k.nkir")
    assert str(info.value).startswith(message), str(info.value)


def test_golden_register_that_is_not_an_integer(golden, reverified):
    bad = DYNAMIC.replace("%r = alloc() : i32[1, 1] sbuf", "%r = alloc() : f32[1, 1] sbuf")
    golden("structure", reverified(parse_kernel(bad)), "runtime-loop-register")


@pytest.mark.parametrize("edits, message", [
    ([("%r = alloc() : i32[1, 1] sbuf", "%r = alloc() : i32[1, 1] psum")],
     "k.py:6: dynamic_range: loop i0: its register %r must be in SBUF, not psum"),
    ([("reads %r[0, 0 ; 1x1]", "reads %n[0, 0 ; 1x1]")],
     "k.py:6: dynamic_range: loop i0: its register %n must be in SBUF, not hbm"),
    ([("%r = alloc() : i32[1, 1] sbuf", "%r = alloc() : i32[1, 2] sbuf"), ("reads %r[0, 0 ; 1x1]", "reads %r"),
      ("%n: i32[1, 1] hbm", "%n: i32[1, 2] hbm")],
     "k.py:6: dynamic_range: loop i0: its register must be one element, not an access of shape [1, 2]"),
    ([("reads %r[0, 0 ; 1x1]", "reads %r[i0, 0 ; 1x1]")],
     "k.py:6: dynamic_range: loop i0: its register is read at an index over i0, which is not an enclosing loop"),
    ([("range(0, 4, 1) reads", "range(4, 4, 1) reads")],
     "k.py:6: dynamic_range: loop i0: its declared bound allows no iteration (range(4, 4, 1)); a runtime loop "
     "declares the largest range it may run"),
])  # fmt: skip
def test_the_structure_rule_checks_the_register_and_the_declared_range(reverified, edits, message):
    text = DYNAMIC
    for old, new in edits:
        text = text.replace(old, new)
    (d,) = reverified(parse_kernel(text)).diagnostics
    assert (d.rule, str(d)) == ("structure", message)


def test_a_while_loop_counts_its_iterations_from_zero(reverified):
    (d,) = reverified(parse_kernel(WHILE.replace("range(0, 8, 1)", "range(2, 8, 1)"))).diagnostics
    assert str(d) == ("k.py:8: while_loop: loop i0: a while loop counts its iterations: range(0, bound, 1), not "
                      "range(2, 8, 1)")


def test_a_negative_bound_is_refused_and_a_huge_one_is_over_budget(reverified):
    (d,) = reverified(parse_kernel(WHILE.replace("range(0, 8, 1)", "range(0, -5, 1)"))).diagnostics
    assert str(d).startswith("k.py:8: while_loop: loop i0: its declared bound allows no iteration (range(0, -5, 1))")
    huge = WHILE.replace("range(0, 8, 1)", f"range(0, {1 << 30}, 1)")
    with pytest.raises(NkiVerificationError) as info:
        nki.parse_ir(huge)  # the public entry for text from outside applies the default budgets
    (d,) = info.value.diagnostics
    assert str(d).startswith("k.py:9: nisa.tensor_scalar: budget max_iterations exceeded: the op executions "), str(d)
    nki.parse_ir(WHILE.replace("range(0, 8, 1)", f"range(0, {1 << 19}, 1)"))  # 4 ops x 2**19 iterations fit


def test_golden_out_of_bounds_over_the_declared_range(golden, reverified):
    """The register may hold at most 5 here, and the fifth tile leaves %a: refused before anything runs."""
    golden("out-of-bounds", reverified(parse_kernel(DYNAMIC.replace("range(0, 4, 1)", "range(0, 5, 1)"))),
           "dynamic-range")  # fmt: skip


def test_the_dependence_rules_read_a_runtime_loop_as_sequential():
    """Its iterations run in order: carrying a tile across them (the while loop's %t) is not a race."""
    assert verify_kernel(parse_kernel(WHILE), TRN2) == []
    as_affine = WHILE.replace("while i0 = range(0, 8, 1) reads %r", "affine i0 = range(0, 8, 1)")
    assert "affine-dependence" in {d.rule for d in verify_kernel(parse_kernel(as_affine), TRN2)}


def test_a_scalar_offset_loop_runs_once_at_the_register_value_and_its_range_is_checked(reverified):
    run = compile_kernel(parse_kernel(OFFSET)).run
    np.testing.assert_array_equal(run({"a": A.reshape(512, 128)[:, :64].copy(), "n": np.array([[9]], np.int32)}),
                                  A.reshape(512, 128)[9:137, :64])
    with pytest.raises(NkiRuntimeError, match=r"^k.py:7: ap\(scalar_offset=\): the scalar_offset register holds 385"):
        run({"a": np.zeros((512, 64), np.float32), "n": np.array([[385]], np.int32)})
    wide = reverified(parse_kernel(OFFSET.replace("range(0, 385, 1)", "range(0, 386, 1)")))
    assert [(d.rule, d.loc.line) for d in wide.diagnostics] == [("out-of-bounds", 7)]
    # one execution per entry: a range of a million offsets stays inside the work budget
    big = OFFSET.replace("f32[512, 64] hbm", "f32[1048704, 64] hbm").replace("range(0, 385, 1)", "range(0, 1048577, 1)")
    nki.parse_ir(big)


def test_a_register_made_inside_an_ended_loop_is_out_of_scope(reverified):
    """The loop's read is not an op, so the scope rule checks it apart: after the loop that made it, the register
    holds one iteration's value (and the JAX backend keeps such a tile local to the iteration)."""
    made = "  %r = alloc() : i32[1, 1] sbuf loc(4)\n  nisa.dma_copy(dst=%r, src=%n) loc(5)\n"
    inside = ("  sequential i1 = range(0, 2, 1) loc(4) {\n    %r = alloc() : i32[1, 1] sbuf loc(4)\n"
              "    nisa.dma_copy(dst=%r, src=%n) loc(5)\n  }\n")
    (d,) = reverified(parse_kernel(DYNAMIC.replace(made, inside))).diagnostics
    assert str(d) == ("k.py:6: dynamic_range: loop i0 reads its register %r i32[1, 1] in 'sbuf' after the "
                      "sequential_range loop at line "
                      "4 that made it (line 4); allocate the register before that loop")
