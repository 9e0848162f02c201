"""The tracer only builds indices from variables in scope, so these tests verify IR text, as a Hub bundle
would deliver it."""

import pytest

from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes.verifier import check, verify_kernel
from nki_dsl.targets import get_target

TRN2 = get_target("trn2")

LOOP_INDEX_OUTSIDE_ITS_LOOP = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %1 = nl.load(src=%a[d0 + 128*i0, d1 ; 128x512]) : f32[128, 512] sbuf loc(4)
  nl.store(dst=%0, value=%1) loc(5)
}
"""

PID_AND_AXIS_OUT_OF_RANGE = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid (2)
  source "k.py"
  %0 = alloc() : f32[256, 512] shared_hbm loc(3)
  %1 = nl.load(src=%a[d0 + 128*pid1, d1 ; 128x512]) mask[d2 <= 99] : f32[128, 512] sbuf loc(4)
  nl.store(dst=%0[d0 + 128*pid0, d1 ; 128x512], value=%1) loc(5)
}
"""

IN_SCOPE = """\
kernel k(%a: f32[256, 512] hbm) -> (%0) {
  grid (2)
  source "k.py"
  %0 = alloc() : f32[256, 512] shared_hbm loc(3)
  %1 = nl.load(src=%a[d0 + 128*pid0, d1 ; 128x512]) mask[d0 <= 99] : f32[128, 512] sbuf loc(4)
  nl.store(dst=%0[d0 + 128*pid0, d1 ; 128x512], value=%1) loc(5)
}
"""


def test_golden_loop_index_used_outside_its_loop(golden, reverified):
    golden("mask-vars", reverified(parse_kernel(LOOP_INDEX_OUTSIDE_ITS_LOOP)))


def test_program_ids_past_the_grid_and_mask_axes_past_the_op_are_rejected(reverified):
    messages = [d.message for d in reverified(parse_kernel(PID_AND_AXIS_OUT_OF_RANGE)).diagnostics]
    assert messages == [
        "operand 'src' %a[128, 512] in 'hbm' indexes with pid1, but the launch grid has 1 axis",
        "mask uses d2, but there are only 2 axes (d0, d1); a mask ranges over the op's iteration space [128, 512]",
    ]


def test_variables_in_scope_are_accepted():
    assert verify_kernel(parse_kernel(IN_SCOPE), TRN2) == []


def test_other_rules_wait_for_well_formed_indices():
    # i0 has no range outside a loop, so the bounds rule could only guess; it must not run.
    with pytest.raises(NkiVerificationError) as info:
        check(parse_kernel(LOOP_INDEX_OUTSIDE_ITS_LOOP.replace("f32[256, 512] hbm", "f32[64, 512] hbm")), TRN2)
    assert [d.rule for d in info.value.diagnostics] == ["mask-vars"]
