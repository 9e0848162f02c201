"""A tile made in a loop body rotates its copies over the flattened iteration of every loop around it
(passes/allocate.py, ``_rotation_loops``), not only its innermost loop: when that loop runs once, the outer loop's
iterations still get different copies and overlap. A true dependence across the outer iterations (state made
outside the loops, updated in place) keeps them in order all the same: that tensor has one copy, and the simulator
orders its readers and writers by address."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import Scheduler
from nki_dsl.backends.simulator import _cells as cells
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.backends.simulator.stream import Stream
from nki_dsl.ir.nodes import Loop
from nki_dsl.targets import get_target

T = get_target("trn2")
ROWS, COLS, OUTER = 128, 2048, 4


@nki.jit
def heads_of_one_tile(x):
    """Per outer iteration (a "head") one inner iteration (a query tile at a short sequence): load, exp, store."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(ROWS)[:, None], nl.arange(COLS)[None, :]
    for h in nl.affine_range(OUTER):
        for q in nl.affine_range(1):
            t = nl.load(x[(h + q) * ROWS + i_p, i_f])
            nl.store(out[(h + q) * ROWS + i_p, i_f], value=nl.exp(t))
    return out


@nki.jit
def running_sum(x):
    """A sequential outer loop carrying ``acc`` (made outside the loops) from one iteration to the next."""
    out = nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(ROWS)[:, None], nl.arange(COLS)[None, :]
    acc = nl.zeros((ROWS, COLS), nl.float32, buffer=nl.sbuf)
    for h in nl.sequential_range(OUTER):
        for q in nl.sequential_range(1):
            t = nl.load(x[(h + q) * ROWS + i_p, i_f])
            acc[i_p, i_f] = nl.add(acc, t)
    nl.store(out, value=acc)
    return out


def _schedule(kernel):
    """The lowered kernel's allocation and, per op name, the (start, end) of each of its instructions in issue
    order (one per iteration)."""
    prepared = prepare(nki.trace(kernel, nki.spec((OUTER * ROWS, COLS), "float32")).ir, T)
    stream = Stream(prepared.lowered, prepared.allocation, T)
    sched = Scheduler(T, untracked=stream.untracked(), cells=cells(T))
    stream.run(sched.step)
    s = sched.finish()
    times: dict[str, list[tuple[float, float]]] = {}
    for k in range(len(s)):
        op = s.templates[s.template[k]].op
        times.setdefault(op.name, []).append((s.start[k], s.end[k]))
    return prepared, times


def test_outer_iterations_overlap_when_the_inner_loop_runs_once():
    prepared, times = _schedule(heads_of_one_tile)
    outer = next(lp for lp, _ in prepared.lowered.walk() if isinstance(lp, Loop) and lp.trip_count == OUTER)
    tiles = [p for p in prepared.allocation.placements.values() if p.buffer == "sbuf"]
    assert tiles and all(p.buffers == 3 and p.turns == ((outer.var, 1),) for p in tiles), tiles
    loads = times["nisa.dma_copy"][::2]  # load, store, load, store, ...
    exps = times["nisa.activation"]
    assert len(loads) == len(exps) == OUTER
    # head 1's load fills another copy while head 0's exp reads its tile (one copy: it waited for that exp)
    assert loads[1][0] < exps[0][1]
    assert loads[2][0] < exps[0][1]
    # three copies: head 3's load reuses head 0's copy and waits for head 0's exp to have read it (WAR)
    assert loads[3][0] >= exps[0][1]


def test_a_dependence_across_outer_iterations_still_orders_them():
    prepared, times = _schedule(running_sum)
    adds = times["nisa.tensor_tensor"]
    assert len(adds) == OUTER
    for before, after in zip(adds, adds[1:]):
        assert after[0] >= before[1]  # each add reads the acc the one before wrote (RAW through one copy)
    acc = [p for p in prepared.allocation.placements.values() if p.buffer == "sbuf" and p.buffers == 1]
    assert acc  # the carried state is not rotated
    loads = times["nisa.dma_copy"][:OUTER]
    assert loads[1][0] < adds[0][1]  # the loaded tiles rotate over the sequential loop: the next load runs ahead
    x = np.random.default_rng(0).standard_normal((OUTER * ROWS, COLS)).astype(np.float32)
    got, _ = nki.simulate(running_sum, x, target="trn2")
    np.testing.assert_allclose(np.asarray(got), x.reshape(OUTER, ROWS, COLS).sum(0), rtol=1e-5, atol=1e-5)

