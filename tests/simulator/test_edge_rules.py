"""Simulator rules at their edges: the §2.3 cost cases that depend on where both inputs live and on the dtype and
operator of a reduction, and dependences through a write that covers only some of the partitions of an earlier
one. Costs are compared with each other as §2.3 states them (N against 2N, N/2 against N), not pinned to numbers,
so a documented change of the model's constants keeps them."""

import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.simulator.deps import DependenceTracker
from nki_dsl.targets import get_target
from tests.simulator.support import simulate

N = 512  # elements per partition: well above MIN_II, so no instruction sits at the issue floor


def _base_ns(prof, opcode, pick):
    """Duration of the first (in program order) ``opcode`` instruction whose op satisfies ``pick``: the template's
    own duration, without the static overhead a dependent instruction adds."""
    return next(t for t in prof.schedule.templates if t.opcode == opcode and pick(t.op)).duration_ns


def _buffers(op):
    return tuple(op.operands[k].tensor.type.buffer.value for k in ("data1", "data2"))


@nki.jit
def tensor_tensor_operands(x, w):
    out = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(x)
    s = nl.load(w)
    m1 = nisa.nc_matmul(s, a)  # PSUM [128, N]
    m2 = nisa.nc_matmul(s, b)
    pp = nisa.tensor_tensor(m1, m2, op=nl.add)
    ps = nisa.tensor_tensor(m1, a, op=nl.add)
    ss = nisa.tensor_tensor(a, b, op=nl.add)
    nl.store(out, value=nl.add(nl.add(pp, ps), ss))
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_tensor_tensor_with_both_inputs_in_psum_reads_twice_per_element(target):
    # §2.3 tensor_tensor: max(MIN_II, N) with one input in PSUM and the other in SBUF; otherwise (fp32) 2N.
    prof = simulate(tensor_tensor_operands, nki.spec((128, N), "float32"), nki.spec((128, 128), "float32"),
                    target=target)[1]  # fmt: skip
    tt = "nisa.tensor_tensor"
    pp = _base_ns(prof, tt, lambda op: _buffers(op) == ("psum", "psum"))
    ps = _base_ns(prof, tt, lambda op: _buffers(op) == ("psum", "sbuf"))
    ss = _base_ns(prof, tt, lambda op: _buffers(op) == ("sbuf", "sbuf"))  # a + b, before the final adds
    assert pp == pytest.approx(2 * ps)
    assert pp == pytest.approx(ss)
    assert ps == pytest.approx(N / get_target(target).vector_ghz)


@nki.jit
def reductions(x, fn, dtype):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x, dtype=getattr(nl, dtype))
    r = nisa.tensor_reduce(getattr(nl, fn), t, axis=1, keepdims=True)
    nl.store(out, value=nl.copy(r, dtype=nl.float32))
    return out


def _reduce_ns(fn, dtype, target="trn2"):
    prof = simulate(reductions, nki.spec((128, N), "float32"), fn=fn, dtype=dtype, target=target)[1]
    return _base_ns(prof, "nisa.tensor_reduce", lambda op: True)


@pytest.mark.parametrize("fn", ["maximum", "add"])
def test_a_bf16_add_or_max_reduction_takes_half_the_cycles(fn):
    # §2.3 tensor_reduce: N/2 when bf16 in and out and the op is add or max, else N.
    assert _reduce_ns(fn, "bfloat16") == pytest.approx(_reduce_ns(fn, "float32") / 2)


@pytest.mark.parametrize("fn", ["minimum", "multiply"])
def test_other_bf16_reductions_take_the_full_cycles(fn):
    assert _reduce_ns(fn, "bfloat16") == pytest.approx(_reduce_ns(fn, "float32"))
    assert _reduce_ns(fn, "bfloat16") == pytest.approx(2 * _reduce_ns("maximum", "bfloat16"))


# --- dependences through partial-partition writes --------------------------------------------------------------------

SBUF = 0  # region key of an on-chip byte space (cells of 4 KiB, as the simulator lays SBUF out)


def _run(tracker, ident, end, reads=(), writes=()):
    """Schedule one instruction at the time the tracker says; returns (start, the instruction that set it)."""
    start, who = tracker.ready(list(reads), list(writes))
    tracker.commit(list(reads), list(writes), end, ident)
    return start, who


@pytest.mark.parametrize("space", ["on-chip", "hbm"])
def test_a_write_to_half_the_partitions_keeps_the_other_half_of_an_earlier_write(space):
    tracker = DependenceTracker(cells={SBUF: 4096} if space == "on-chip" else {})
    key = SBUF if space == "on-chip" else 7  # an HBM tensor: a grid space made on first use
    full, top, bottom = (0, 128, 0, 512), (0, 64, 0, 512), (64, 128, 0, 512)
    _run(tracker, 0, 10.0, writes=[(key, full)])  # writes all 128 partitions, ends at 10
    assert _run(tracker, 1, 20.0, writes=[(key, top)]) == (10.0, 0)  # WAW on partitions 0-63
    # Partitions 64-127 still hold instruction 0's data: reading them waits for it (RAW), not for nothing.
    assert _run(tracker, 2, 30.0, reads=[(key, bottom)]) == (10.0, 0)
    assert _run(tracker, 3, 40.0, reads=[(key, top)]) == (20.0, 1)


@pytest.mark.parametrize("space", ["on-chip", "hbm"])
def test_a_write_to_some_bytes_keeps_the_rest_of_an_earlier_write(space):
    tracker = DependenceTracker(cells={SBUF: 4096} if space == "on-chip" else {})
    key = SBUF if space == "on-chip" else 7
    _run(tracker, 0, 10.0, writes=[(key, (0, 128, 0, 2048))])
    _run(tracker, 1, 20.0, writes=[(key, (0, 128, 0, 1024))])
    assert _run(tracker, 2, 30.0, reads=[(key, (0, 128, 1024, 2048))]) == (10.0, 0)


def test_a_write_covering_every_partition_supersedes_the_earlier_write():
    tracker = DependenceTracker(cells={SBUF: 4096})
    _run(tracker, 0, 10.0, writes=[(SBUF, (0, 64, 0, 512))])
    _run(tracker, 1, 20.0, writes=[(SBUF, (0, 128, 0, 512))])
    assert _run(tracker, 2, 30.0, reads=[(SBUF, (0, 32, 0, 512))]) == (20.0, 1)
    assert len([r for recs in tracker.spaces[SBUF].cells.values() for r in recs if r[5]]) == 2  # write + read


# --- the predecessor recorded on a tie ---------------------------------------------------------------------------


def _template(engine, duration):
    from types import SimpleNamespace

    return SimpleNamespace(engine=engine, ports=(), duration_ns=duration, fixed_ns=0.0, payload_ns=0.0, dma_engines=0)


def test_when_the_engine_and_the_data_are_ready_at_once_the_engine_predecessor_is_recorded():
    """An instruction whose engine frees up exactly when its input is written records the instruction before it on
    its own engine, the first cause in program order (the critical path then follows the engine's timeline); a
    later data arrival replaces it."""
    from nki_dsl.backends.simulator import Scheduler

    sched = Scheduler(get_target("trn2"), cells={SBUF: 4096})
    region = (SBUF, (0, 128, 0, 512))
    sched.step(_template("vector", 10.0), (), ())  # 0: the vector engine busy until 10
    sched.step(_template("scalar", 10.0), (), (region,))  # 1: writes the region, done at 10
    sched.step(_template("vector", 5.0), (region,), ())  # 2: engine free and data ready at 10
    sched.step(_template("scalar", 20.0), (), (region,))  # 3: rewrites the region after 2's read, done at 35
    sched.step(_template("vector", 5.0), (region,), ())  # 4: the engine is free at 15, the data at 35
    s = sched.finish()
    assert (s.start[2], s.pred[2]) == (10.0, 0)
    assert (s.start[4], s.pred[4]) == (35.0, 3)


@pytest.mark.parametrize("space", ["on-chip", "hbm"])
def test_a_write_waits_for_the_latest_reader_not_the_last_issued(space):
    tracker = DependenceTracker(cells={SBUF: 4096} if space == "on-chip" else {})
    key = SBUF if space == "on-chip" else 7
    box = (0, 128, 0, 512)
    _run(tracker, 0, 10.0, writes=[(key, box)])
    _run(tracker, 1, 30.0, reads=[(key, box)])  # a long read, ends at 30
    _run(tracker, 2, 20.0, reads=[(key, box)])  # issued later on another engine, ends sooner
    assert _run(tracker, 3, 40.0, writes=[(key, box)]) == (30.0, 1)  # WAR: after the read that ends last


@pytest.mark.parametrize("space", ["on-chip", "hbm"])
def test_a_box_over_several_cells_is_found_from_each_of_them(space):
    # On-chip cells are 4 KiB of bytes; an HBM tensor's cell is the first box seen for it, [128, 512] here.
    tracker = DependenceTracker(cells={SBUF: 4096} if space == "on-chip" else {})
    key = SBUF if space == "on-chip" else 7
    if space == "on-chip":
        first, wide, left, right = (0, 128, 0, 4096), (0, 128, 0, 12288), (0, 128, 0, 100), (0, 128, 12000, 12288)
    else:
        first, wide, left, right = (0, 128, 0, 512), (0, 128, 0, 1536), (0, 128, 0, 8), (0, 128, 1500, 1536)
    _run(tracker, 0, 10.0, writes=[(key, first)])
    _run(tracker, 1, 20.0, writes=[(key, wide)])  # three cells
    assert _run(tracker, 2, 30.0, reads=[(key, right)]) == (20.0, 1)  # from the last cell
    assert _run(tracker, 3, 30.0, reads=[(key, left)]) == (20.0, 1)
    assert _run(tracker, 4, 40.0, writes=[(key, right)]) == (30.0, 2)  # WAR found from the last cell
    assert _run(tracker, 5, 50.0, reads=[(key, wide)]) == (40.0, 4)  # a wide read sees a write in its last cell
