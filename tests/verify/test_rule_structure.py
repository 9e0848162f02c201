"""The tracer and the parser only build well-formed IR, so these tests alter it by hand, as a pass or a Hub
bundle the parser's grammar allows could."""

from pathlib import Path

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


@nki.jit
def _times(x, factor):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), factor))  # the immediate
    return out


IMMEDIATES = [(2**31 - 1, False), (-(2**31), False), (2**32 - 1, False), (2**32, True), (-(2**31) - 1, True),
              (10**18, True), (2.0**40, False)]  # fmt: skip


@pytest.mark.parametrize("factor, refused", IMMEDIATES)
def test_an_integer_immediate_must_fit_int32_or_uint32(factor, refused):
    # Found by the IR fuzzer: y=999999999999999999 ran on NumPy (fp32 * a Python int) and was a raw OverflowError
    # in JAX (its weak ints are int32); an int32 tile times it is an OverflowError in NumPy too.
    x = np.ones((128, 64), np.float32)
    if not refused:
        for backend in ("numpy", "jax"):
            np.testing.assert_array_equal(np.asarray(_times(x, factor, backend=backend)), x * np.float32(factor))
        return
    with pytest.raises(nki.NkiVerificationError) as e:
        _times(x, factor)
    (d,) = e.value.diagnostics
    assert (d.rule, d.op) == ("structure", "nl.multiply") and "fits neither int32 nor uint32" in d.message
    assert "the immediate" in Path(__file__).read_text().splitlines()[d.loc.line - 1]
