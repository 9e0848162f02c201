"""A loop whose last tile runs past its tensor (masked by the loop's own variable, so the region is clipped in
that iteration only) schedules the same whether or not the simulator advances loops by arithmetic."""

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
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


@nki.jit
def ragged_column_sums(a):
    rows, n = a.shape
    chunks = (n + 511) // 512
    out = nl.ndarray((rows, chunks), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f, i_one = nl.arange(128)[:, None], nl.arange(512)[None, :], nl.arange(1)[None, :]
    for c in nl.affine_range(chunks):
        t = nl.load(a[i_p, c * 512 + i_f], mask=c * 512 + i_f < n)
        # the mask constrains the reduced axis: the IR keeps it as the reduction's reduce_mask
        s = nisa.tensor_reduce(np.add, t, axis=(1,), mask=c * 512 + i_f < n, dtype=nl.float32)
        nl.store(out[i_p, c + i_one], value=s)
    return out


def test_a_reduction_masked_over_its_reduced_axis_in_the_last_iteration_is_advanced_before_it():
    # The reduce_mask depends on the loop variable and holds for every chunk but the ragged last one: the chunks
    # before it are advanced (they were not, when any loop-dependent reduce_mask blocked the loop), and the
    # schedule is the one-by-one one.
    fast, exact = _both(ragged_column_sums, nki.spec((128, 512 * 40 + 100), "float32"))
    assert "reduce_mask" in [op for op in _reduce_ops(ragged_column_sums)][0].attrs
    assert 0 < fast.schedule.advanced < fast.instructions
    same_schedule(fast, exact)


def _reduce_ops(kernel):
    traced = nki.trace(kernel, nki.spec((128, 512 * 2 + 100), "float32"), target="trn2")
    found = []

    def walk(body):
        for st in body:
            if hasattr(st, "body"):
                walk(st.body)
            elif getattr(st, "name", "") == "nisa.tensor_reduce":
                found.append(st)

    walk(traced.ir.body)
    return found
