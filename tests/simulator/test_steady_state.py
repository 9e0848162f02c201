"""Loops advanced by arithmetic once their schedule repeats (``backends/simulator/steady.py``): the same schedule
as scheduling every instruction (up to rounding, ``same_schedule``), the trace still lists every instruction, the
records left behind serve the instructions after the loop, and only loops the argument covers are advanced."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import chrome_trace, profile, steady
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.targets import get_target
from tests.simulator.generated_kernels import F_MAX, MAX_KT, Plan, generated, plans
from tests.simulator.support import specialized
from tests.simulator.test_generated_kernels import check_critical_path
from tests.simulator.test_speed_invariance import CASES, _ir, same_schedule

TRN2 = get_target("trn2")


@nki.jit
def two_passes(a):
    """Loop 1 stores tiles of an HBM intermediate, loop 2 reads them back: loop 2's loads must wait for the stores
    loop 1's advanced iterations made (their records come from the replay)."""
    tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(tmp[i * 128:(i + 1) * 128, :], value=nl.exp(t))
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(tmp[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(t, 2.0))
    return out


@nki.jit
def ragged_columns(a):
    """Row tiles of a matrix whose width (300) is not a tile's (512): the same column mask in every iteration; a
    second loop reads the stored tiles back (so the records the first loop's replay made must be the stream's)."""
    tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(a[i * 128 + i_p, i_f], mask=(i_f < a.shape[1]))
        nl.store(tmp[i * 128 + i_p, i_f], value=nl.exp(t), mask=(i_f < a.shape[1]))
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(tmp[i * 128 + i_p, i_f], mask=(i_f < a.shape[1]))
        nl.store(out[i * 128 + i_p, i_f], value=nl.exp(t), mask=(i_f < a.shape[1]))
    return out


def _both(kernel, *specs, target="trn2"):
    ir = _ir(kernel, specs, target)
    return profile(ir, get_target(target)), profile(ir, get_target(target), steady=False)


def test_records_left_by_an_advanced_loop_order_the_next_loop():
    tiles = 32
    fast, exact = _both(two_passes, nki.spec((128 * tiles, 512), "float32"))
    s = fast.schedule
    assert s.advanced > 0.3 * fast.instructions  # (most of loop 1)
    same_schedule(fast, exact)
    check_critical_path(fast)
    # loop 2's load of tile i (instruction 3 * tiles + 3 * i) waits for loop 1's store of it (3 * i + 2)
    for i in range(tiles):
        assert s.start[3 * tiles + 3 * i] >= s.end[3 * i + 2]


@pytest.mark.parametrize("trim", [steady.TRIM_ENTRIES, 3])
def test_a_sequential_loop_with_carried_state_is_advanced_alike(trim, monkeypatch):
    """(Also with the region log trimmed all the time: nested runs each keep what they still need.)"""
    from tests.kernels.nki_style.attention import flash_fwd

    monkeypatch.setattr(steady, "TRIM_ENTRIES", trim)

    q = nki.spec((1, 1, 128, 4096), "bfloat16")
    fast, exact = _both(flash_fwd[1, 1], q, q, nki.spec((1, 1, 4096, 128), "bfloat16"))
    assert fast.schedule.advanced > 0.5 * fast.instructions
    same_schedule(fast, exact)
    check_critical_path(fast)


def test_the_trace_lists_every_instruction_of_advanced_iterations():
    fast, exact = _both(two_passes, nki.spec((128 * 32, 512), "float32"))
    assert fast.schedule.advanced > 0
    a, b = (chrome_trace.trace_events(p.schedule, "k")["traceEvents"] for p in (exact, fast))
    assert len(a) == len(b)
    tol = 1e-9 * exact.latency_us
    for x, y in zip(a, b):
        assert (x["ph"], x["name"], x.get("cat"), x["tid"]) == (y["ph"], y["name"], y.get("cat"), y["tid"])
        if x["ph"] == "X":
            assert abs(x["ts"] - y["ts"]) <= tol and abs(x["dur"] - y["dur"]) <= tol
    instructions = [e for e in b if e.get("cat") == "instruction"]
    assert len(instructions) == fast.instructions


def test_only_loops_the_argument_covers_are_advanced():
    """No advanced loop has an on-chip region that moves with its variable, and one with an instruction masked by
    its variable is advanced only over the iterations where that instruction is whole (``full_until``)."""
    t = get_target("trn2")
    seen = 0
    for name, (kernel, args, target) in sorted(CASES.items()):
        if not name.endswith("trn2"):
            continue
        stream = prepare(_ir(kernel, args, target), t).stream()
        for lf in stream.steady.values():
            seen += 1
            var = lf.loop.var
            for op, write, tmpl in lf.instructions:
                for m in (op.mask, write.mask if write is not None else None):
                    if m is not None and any(v == var for c in m.constraints for v, _ in c.terms):
                        assert lf.full_until < lf.loop.stop, name
                for a in (*tmpl.reads, *tmpl.writes):
                    if a.tensor.type.buffer.on_chip:
                        assert all(v != var for e in a.index for v, _ in e.terms), name
    assert seen > 0


@pytest.mark.parametrize("rows, cols", [(1000, 5000), (128 * 7, 512 * 9 + 1), (129, 512 * 12)])
def test_a_loop_masked_in_its_last_iteration_advances_its_whole_iterations(rows, cols):
    # rows: tiles 0..ceil(rows / 128) - 2 are whole; cols: tiles 0..ceil(cols / 512) - 2 (reference/nki.md §1.3 masks)
    from tests.kernels.nki_style.tensor_add import nki_tensor_add_ragged

    args = (nki.spec((rows, cols), "float32"),) * 2
    stream = prepare(_ir(nki_tensor_add_ragged, args, "trn2"), get_target("trn2")).stream()
    whole = {lf.loop.stop: lf.full_until for lf in stream.steady.values()}
    for n, size, tile in ((-(-rows // 128), rows, 128), (-(-cols // 512), cols, 512)):
        if n in whole and n >= 6:  # (loops of fewer than MIN_PERIODS whole iterations are not watched)
            assert whole[n] == (n - 1 if size % tile == 0 else n - 2)
    fast, exact = _both(nki_tensor_add_ragged, *args)
    same_schedule(fast, exact)
    assert fast.schedule.advanced > 0 or not stream.steady


def test_steady_false_schedules_every_instruction():
    fast, exact = _both(two_passes, nki.spec((128 * 32, 512), "float32"))
    assert exact.schedule.advanced == 0 and len(exact.schedule) == exact.instructions == fast.instructions
    assert np.array_equal(np.asarray(exact.schedule.template), np.asarray(fast.schedule.template))


@settings(max_examples=25, deadline=None)
@given(plans(), st.integers(12, 32))
@example(Plan("sequential", 1, 128, 256, (("matmul", 2), ("reduce", "max"), ("inplace",))), 16)
@example(Plan("affine", 1, 32, 128, (("transpose",), ("unary", "exp"), ("binary", "add"))), 12)
@example(Plan("none", 1, 1, 1, (("unary", "exp"),)), 24)  # a predecessor tie in every iteration (CI, 2026-12-01)
def test_generated_kernels_with_long_loops_advance_like_they_schedule(plan, trips):
    """Hypothesis-built kernels (tests/simulator/generated_kernels.py) with a loop long enough to watch: whatever
    the default path advances, the schedule is the instruction-by-instruction one."""
    plan = Plan(plan.loop if plan.loop != "none" else "affine", trips, plan.p, plan.f, plan.steps)
    x = nki.spec((128, trips * F_MAX), "float32")
    w = nki.spec((MAX_KT * 128, 128), "float32")
    ir = specialized(generated, x, x, w, plan=plan.astuple())
    fast, exact = profile(ir, TRN2), profile(ir, TRN2, steady=False)
    same_schedule(fast, exact)
    check_critical_path(fast)


def test_a_mask_that_is_the_same_in_every_iteration_does_not_stop_advancing():
    ir = _ir(ragged_columns, (nki.spec((128 * 32, 300), "float32"),), "trn2")
    stream = prepare(ir, get_target("trn2")).stream()
    assert stream.steady and all(any(op.mask is not None for op, _, _ in lf.instructions)
                                 for lf in stream.steady.values())  # fmt: skip
    fast, exact = profile(ir, TRN2), profile(ir, TRN2, steady=False)
    assert fast.schedule.advanced > 0.3 * fast.instructions
    same_schedule(fast, exact)
    s = fast.schedule
    for i in range(32):  # the second loop's load of tile i waits for the first loop's store of it
        assert s.start[3 * 32 + 3 * i] >= s.end[3 * i + 2]


def _final_state(ir, advance: bool):
    """The scheduler after a run (``_profile``'s steps), with or without advancing loops."""
    from nki_dsl.backends.simulator import _cells
    from nki_dsl.backends.simulator.scheduler import Scheduler
    from nki_dsl.backends.simulator.steady import Steady

    t = get_target("trn2")
    stream = prepare(ir, t).stream()
    log = [] if advance else None
    sched = Scheduler(t, untracked=stream.untracked(), cells=_cells(t), log=log)
    stream.run(sched.step, Steady(stream, sched, log) if advance else None)
    return sched


@pytest.mark.parametrize("case", ["two passes", "ragged columns", "flash 4096", "tutorial04 1 naive tiled trn2"])
def test_advancing_leaves_the_state_scheduling_leaves(case):
    """Clocks, DMA bookings and every live dependence record after the run: what follows a loop sees the same."""
    from tests.kernels.nki_style.attention import flash_fwd

    q = nki.spec((1, 1, 128, 4096), "bfloat16")
    kernel, args, target = {
        "two passes": (two_passes, (nki.spec((128 * 32, 512), "float32"),), "trn2"),
        "ragged columns": (ragged_columns, (nki.spec((128 * 32, 300), "float32"),), "trn2"),
        "flash 4096": (flash_fwd[1, 1], (q, q, nki.spec((1, 1, 4096, 128), "bfloat16")), "trn2"),
    }.get(case) or CASES[case]
    ir = _ir(kernel, args, target)
    a, b = _final_state(ir, False), _final_state(ir, True)
    latency = max(a.arrays[3])
    tol = 1e-9 * latency

    def close(x, y):
        return len(x) == len(y) and all(abs(u - v) <= tol for u, v in zip(x, y))

    sa, sb = a.state, b.state
    assert close(sa.free, sb.free) and sa.last == sb.last and sa.rr == sb.rr and sa.loaded == sb.loaded
    # the DMA engines' bookings any later transfer could meet (ending after every queue's free time; advancing keeps
    # older ones as they were, steady.py)
    F = min(sa.free[sa.n_engines:])

    def bookings(pool):
        return [(max(lo, F), hi, who) for lo, hi, who in zip(pool.starts, pool.ends, pool.owners) if hi > F]

    ba, bb = bookings(sa.pool), bookings(sb.pool)
    assert len(ba) == len(bb) and all(close(x[:2], y[:2]) and x[2] == y[2] for x, y in zip(ba, bb))
    ta, tb = sa.tracker.spaces, sb.tracker.spaces
    assert ta.keys() == tb.keys()
    for key in ta:
        ra = {box: r for box, r in ta[key].exact.items() if r[5]}
        rb = {box: r for box, r in tb[key].exact.items() if r[5]}
        assert ra.keys() == rb.keys(), key
        for box, r in ra.items():
            s = rb[box]
            assert abs(r[1] - s[1]) <= tol and abs(r[3] - s[3]) <= tol and r[2] == s[2], (key, box)
            assert r[4] == s[4] or abs(r[3] - s[3]) <= tol, (key, box)  # a reader tie may name another
