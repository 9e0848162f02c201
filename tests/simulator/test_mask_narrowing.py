"""A masked instruction is priced on the box its mask keeps (templates.MaskShrink): each constraint over one axis
narrows that axis; a constraint over several axes is not narrowed (the full tile, conservatively) and must not
stop the others from narrowing. The mask's constraints are sorted by their text, so ``d0 + d1 <= 1000`` comes
before ``d1 - 128*i0 >= 0``."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import profile
from nki_dsl.targets import get_target
from tests.simulator.test_speed_invariance import _ir


@nki.jit
def shrinking_suffix(a, with_two_axis_constraint):
    """Iteration i takes exp of columns 128 i.. of a; the two-axis constraint holds everywhere (127 + 511 < 1000)."""
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    for i in nl.affine_range(4):
        m = i_f >= 128 * i
        if with_two_axis_constraint:
            m = m & (i_p + i_f <= 1000)
        nl.store(out[i], value=nl.exp(t, mask=m))
    return out


def _activation_ns(with_two_axis_constraint):
    ir = _ir(shrinking_suffix, (nki.spec((128, 512), "float32"), with_two_axis_constraint), "trn2")
    s = profile(ir, get_target("trn2")).schedule
    took = np.asarray(s.end) - np.asarray(s.start)
    return [d for k, d in zip(s.template, took) if s.templates[k].opcode == "nisa.activation"]


def test_single_axis_constraints_narrow_past_a_constraint_over_several_axes():
    plain, mixed = _activation_ns(False), _activation_ns(True)
    assert len(plain) == 4
    # 4, 3, 2 and 1 of the four 128-column blocks (well above MIN_II)
    assert plain == pytest.approx([plain[0] * k / 4 for k in (4, 3, 2, 1)])
    assert mixed == pytest.approx(plain)
