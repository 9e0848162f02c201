"""An instruction whose mask lets no element through in an iteration does not run there (reference/nki.md §1.3
masks): the simulator schedules nothing for it, as if that iteration's instance did not exist."""

from __future__ import annotations

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import profile
from nki_dsl.targets import get_target
from tests.simulator.test_speed_invariance import _ir

TRN2 = get_target("trn2")


@nki.jit
def growing_prefix(a, first):
    """Iteration i stores exp of the first 128 * i columns of a into row block i: at i = 0 the mask is empty."""
    out = nl.ndarray((4, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    for i in nl.affine_range(first, 4):
        e = nl.exp(t, mask=(i_f < 128 * i))
        nl.store(out[i], value=e, mask=(i_f < 128 * i))
    return out


def test_an_iteration_whose_mask_lets_nothing_through_schedules_nothing():
    a = nki.spec((128, 512), "float32")
    from_zero, from_one = (profile(_ir(growing_prefix, (a, first), "trn2"), TRN2) for first in (0, 1))
    assert from_zero.instructions == from_one.instructions
    assert from_zero.latency_ns == from_one.latency_ns
