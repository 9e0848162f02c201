"""The tracer and the parser only build well-formed IR, so these tests alter it by hand, as a pass or a Hub
bundle the parser's grammar allows could."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes.verifier import verify_kernel

ZERO_STEP_LOOP = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[256, 512] shared_hbm loc(3)
  affine i0 = range(0, 2, 0) loc(4) {
    %1 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(5)
    nl.store(dst=%0[d0 + 128*i0, d1 ; 128x512], value=%1) loc(6)
  }
}
"""


def test_golden_loop_that_never_advances(golden, reverified):
    golden("structure", reverified(parse_kernel(ZERO_STEP_LOOP)))


def test_the_same_loop_with_step_one_is_accepted():
    fixed = parse_kernel(ZERO_STEP_LOOP.replace("range(0, 2, 0)", "range(0, 2, 1)"))
    assert verify_kernel(fixed, nki.get_target("trn2")) == []


@nki.jit
def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a))
    return out


def test_a_tensor_used_before_its_definition_is_rejected(traced, reverified):
    ir = traced(copy_kernel, np.zeros((128, 512), np.float32))
    alloc, load, store = ir.body
    ir.body[:] = [alloc, store, load]  # a pass that moved the store above the load
    (diag,) = reverified(ir).diagnostics
    assert (diag.rule, diag.op) == ("structure", "nl.store")
    assert diag.message == "operand 'value' uses tensor %1 before it is defined"


def test_other_rules_do_not_run_on_malformed_ir(reverified):
    # With %a only 64 rows the loads would also be out of bounds, but bounds of a loop that never advances mean
    # nothing: only the structure problem is reported.
    small = ZERO_STEP_LOOP.replace("%a: f32[256, 512] hbm", "%a: f32[64, 512] hbm")
    assert [d.rule for d in reverified(parse_kernel(small)).diagnostics] == ["structure"]
    fixed = small.replace("range(0, 2, 0)", "range(0, 2, 1)")
    assert [d.rule for d in reverified(parse_kernel(fixed)).diagnostics] == ["out-of-bounds"]  # the load


def test_a_tensor_defined_twice_is_reported_at_the_second_definition(traced, reverified):
    import copy

    ir = traced(copy_kernel, np.zeros((128, 512), np.float32))
    alloc, load, store = ir.body
    again = copy.copy(load)  # the same result tensor defined by a second op
    again.loc = type(load.loc)(load.loc.file, load.loc.line + 100)
    ir.body[:] = [alloc, load, again, store]
    diags = [d for d in reverified(ir).diagnostics if "defined more than once" in d.message]
    assert [(d.rule, d.op, d.loc.line) for d in diags] == [("structure", "nl.load", load.loc.line + 100)]


def test_a_one_axis_tensor_has_only_partition_axis_zero(traced, reverified):
    from dataclasses import replace

    ir = traced(copy_kernel, np.zeros((128, 512), np.float32))
    tile = ir.body[1].result
    tile.type = replace(tile.type, shape=(128,), par_axis=1)
    messages = [d.message for d in reverified(ir).diagnostics if d.rule == "structure"]
    assert any("partition axis 1 is out of range" in m for m in messages), messages


@pytest.mark.parametrize("field, value", [("stop", 2.0), ("start", "0"), ("step", True)])
def test_a_loop_whose_bounds_are_not_ints_is_refused(reverified, field, value):
    # a pass (or Python-built IR) may set a float, a string or a bool where the grammar has an int
    ir = parse_kernel(ZERO_STEP_LOOP.replace("range(0, 2, 0)", "range(0, 2, 1)"))
    loop = next(s for s in ir.body if hasattr(s, "var"))
    setattr(loop, field, value)
    (diag,) = reverified(ir).diagnostics
    assert (diag.rule, diag.message) == ("structure", "loop i0 bounds must be ints")
