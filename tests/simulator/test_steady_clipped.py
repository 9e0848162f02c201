"""A loop whose last tile runs past its tensor (masked by the loop's own variable, so the region is clipped in
that iteration only) schedules the same whether or not the simulator advances loops by arithmetic."""

import nki_dsl as nki
import nki_dsl.language as nl
from tests.simulator.test_speed_invariance import same_schedule
from tests.simulator.test_steady_state import _both


@nki.jit
def ragged_rows(a):
    tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for i in nl.affine_range((a.shape[0] + 127) // 128):
        t = nl.load(a[i * 128 + i_p, i_f], mask=(i * 128 + i_p < a.shape[0]))
        nl.store(tmp[i * 128 + i_p, i_f], value=nl.exp(t), mask=(i * 128 + i_p < a.shape[0]))
    for i in nl.affine_range((a.shape[0] + 127) // 128):
        t = nl.load(tmp[i * 128 + i_p, i_f], mask=(i * 128 + i_p < a.shape[0]))
        nl.store(out[i * 128 + i_p, i_f], value=nl.exp(t), mask=(i * 128 + i_p < a.shape[0]))
    return out


def test_a_loop_clipped_in_its_last_iteration_schedules_as_one_by_one():
    fast, exact = _both(ragged_rows, nki.spec((128 * 31 + 40, 512), "float32"))
    same_schedule(fast, exact)
