"""No two on-chip tensors live at the same time share SBUF or PSUM bytes: checked over every benchmark kernel on
every target, every kernel the tutorials trace, hypothesis-generated kernels, and kernels built to stress rotating
buffers. Liveness is recomputed here from the lowered program (not with the allocator's own ``live_ranges``), and
each tensor's footprint counts all of its rotating copies, so an allocator that sizes or spaces copies wrongly,
or misjudges when a tensor dies, puts two live tensors in the same bytes and fails here."""

from __future__ import annotations

import pathlib
import runpy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import nki_dsl as nki
import nki_dsl.language as nl
from benchmarks import reference_cases
from nki_dsl.ir.nodes import Access, Loop, Op
from nki_dsl.passes import run_pipeline
from nki_dsl.passes.allocate import allocate
from nki_dsl.targets import TARGETS, Target, get_target
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.simulator.generated_kernels import generated, plans

ROOT = pathlib.Path(__file__).parents[2]


def live_intervals(low, placed) -> dict[str, tuple[int, int]]:
    """Program-order interval ``[first, last]`` over which each placed tensor holds data: from its first touch to
    its last, widened to the end of every loop it is used in but was not made in (every iteration reads it) and,
    for a tensor with rotating copies, to its whole loop (the copies of all iterations in flight are in use). An
    ``assign`` is written by the instruction just before it, so its destination is touched there too."""
    order: list[tuple[Op, tuple[Loop, ...]]] = []
    spans: dict[str, tuple[int, int]] = {}

    def walk(body, loops):
        for stmt in body:
            if isinstance(stmt, Loop):
                start = len(order)
                walk(stmt.body, loops + (stmt,))
                spans[stmt.var] = (start, max(start, len(order) - 1))
            else:
                order.append((stmt, loops))

    walk(low.body, ())
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    home: dict[str, tuple[Loop, ...]] = {}

    def touch(name, pos, loops):
        if name not in placed:
            return
        if name not in first:
            first[name], home[name] = pos, loops
        end = pos
        for lp in loops:
            if lp not in home[name]:
                end = max(end, spans[lp.var][1])
        last[name] = max(last.get(name, pos), end)

    for pos, (op, loops) in enumerate(order):
        names = [v.tensor.name for v in op.operands.values() if isinstance(v, Access)]
        if op.result is not None:
            names.append(op.result.name)
        for name in names:
            touch(name, pos, loops)
        if op.name == "assign" and pos > 0:
            touch(op.operands["dst"].tensor.name, pos - 1, loops)
    out = {}
    for name, p in placed.items():
        lo, hi = first[name], last[name]
        if p.buffers > 1:
            lo, hi = min(lo, spans[p.loop][0]), max(hi, spans[p.loop][1])
        out[name] = (lo, hi)
    return out


def tensor_bytes(low) -> dict[str, int]:
    sizes = {}
    for stmt, _ in low.walk():
        if isinstance(stmt, Op):
            tensors = [v.tensor for v in stmt.operands.values() if isinstance(v, Access)]
            for t in tensors + ([stmt.result] if stmt.result is not None else []):
                sizes[t.name] = t.type.bytes_per_partition
    return sizes


def assert_no_live_overlap(low, target: str | Target) -> None:
    t = get_target(target)
    alloc = allocate(low, t)
    placed = alloc.placements
    live = live_intervals(low, placed)
    sizes = tensor_bytes(low)
    capacity = {"sbuf": t.sbuf_bytes_per_partition, "psum": t.psum_bytes_per_partition}
    for p in placed.values():
        assert p.bytes_per_partition >= sizes[p.tensor], p
        assert p.partition_start >= 0 and p.partition_start + p.partitions <= t.partitions, p
        assert p.byte_offset >= 0 and p.byte_offset + p.bytes_per_partition * p.buffers <= capacity[p.buffer], p
    items = sorted(placed.values(), key=lambda p: (p.buffer, p.byte_offset))
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if b.buffer != a.buffer or b.byte_offset >= a.byte_offset + a.bytes_per_partition * a.buffers:
                continue  # sorted by offset: no later tensor of this buffer reaches back into a
            (a0, a1), (b0, b1) = live[a.tensor], live[b.tensor]
            if a1 < b0 or b1 < a0:
                continue  # never live together: may share
            if a.partition_start + a.partitions <= b.partition_start:
                continue  # different partitions
            if b.partition_start + b.partitions <= a.partition_start:
                continue
            raise AssertionError(f"{a} and {b} are live together (program points {live[a.tensor]} and "
                                 f"{live[b.tensor]}) in overlapping {a.buffer} bytes")  # fmt: skip


def lowered(kernel, *args, target="trn2", **kwargs):
    return run_pipeline(nki.trace(kernel, *args, target=target, **kwargs).ir, TARGETS[target])


CASES = reference_cases.cases(np.random.default_rng(0))


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_benchmark_kernels_place_no_two_live_tensors_in_the_same_bytes(case, target):
    _, kernel, _, args = case
    assert_no_live_overlap(lowered(kernel, *args, target=target), target)


LESSONS = sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_tutorial_kernels_place_no_two_live_tensors_in_the_same_bytes(lesson, capsys):
    seen = []
    hook = lambda kernel, target: seen.append((kernel, target))
    TRACE_HOOKS.append(hook)
    try:
        runpy.run_path(str(lesson), run_name="__main__")
    finally:
        TRACE_HOOKS.remove(hook)
    capsys.readouterr()
    assert seen, f"{lesson.stem} traced no kernel"
    for kernel, target in seen:
        assert_no_live_overlap(run_pipeline(kernel, target), target)  # the hook passes the Target traced for


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_generated_kernels_place_no_two_live_tensors_in_the_same_bytes(plan):
    f32 = "float32"
    low = lowered(generated, nki.spec((128, 1024), f32), nki.spec((128, 1024), f32), nki.spec((384, 128), f32),
                  plan=plan.astuple())  # fmt: skip
    assert_no_live_overlap(low, "trn2")


@nki.jit
def rotating_beside_resident(x, w, trips):
    """A resident tile live across the loop, loop tiles that rotate, and a tile made after the loop in the bytes
    the loop's copies leave: each copy of the loop tiles must stay clear of both."""
    out = nl.ndarray((128, trips * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    resident = nl.load(w)
    for i in nl.affine_range(trips):
        t = nl.load(x[:, i * 512:(i + 1) * 512])
        u = nl.exp(t)
        nl.store(out[:, i * 512:(i + 1) * 512], value=nl.add(u, resident))
    tail = nl.load(x[:, 0:512])
    nl.store(out[:, 0:512], value=nl.multiply(tail, resident))
    return out


@pytest.mark.parametrize("trips", [2, 3, 8])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_rotating_copies_stay_clear_of_live_tensors(trips, target):
    low = lowered(rotating_beside_resident, nki.spec((128, 8 * 512), "float32"), nki.spec((128, 512), "float32"),
                  trips=trips, target=target)  # fmt: skip
    alloc = allocate(low, TARGETS[target])
    assert any(p.buffers > 1 for p in alloc.placements.values()), "the loop tiles rotate"
    assert_no_live_overlap(low, target)


@nki.jit
def rotating_into_a_gap(x, y, trips):
    """``first`` dies before the loop, ``kept`` lives through it: the bytes ``first`` leaves are one loop tile wide,
    too few for the loop tile's rotating copies."""
    out = nl.ndarray((128, trips * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    first = nl.load(x[:, 0:512])
    kept = nl.load(y)
    nl.store(out[:, 0:512], value=first)
    for i in nl.affine_range(trips):
        nl.store(out[:, i * 512:(i + 1) * 512], value=nl.load(x[:, i * 512:(i + 1) * 512]))
    nl.store(out[:, 0:512], value=kept)
    return out


def test_rotating_copies_do_not_fit_a_gap_one_copy_wide():
    low = lowered(rotating_into_a_gap, nki.spec((128, 4 * 512), "float32"), nki.spec((128, 512), "float32"), trips=4)
    assert_no_live_overlap(low, "trn2")


@nki.jit
def big_tiles_beside_resident(x, w):
    """Tiles so large that the loop's tiles get one copy each; ``resident`` is read in every iteration, so a tile
    made after that read in the body must not take its bytes."""
    cols = w.shape[1]
    out = nl.ndarray((128, 2 * cols), dtype=nl.float32, buffer=nl.shared_hbm)
    resident = nl.load(w)
    for i in nl.affine_range(2):
        t = nl.load(x[:, i * cols:(i + 1) * cols])
        v = nl.add(t, resident)
        nl.store(out[:, i * cols:(i + 1) * cols], value=nl.exp(v))
    return out


def test_a_tensor_read_in_a_loop_keeps_its_bytes_to_the_loop_end():
    cols = TARGETS["trn2"].sbuf_bytes_per_partition // 4 // 4 // 512 * 512  # four such tiles fit, not five
    low = lowered(big_tiles_beside_resident, nki.spec((128, 2 * cols), "float32"), nki.spec((128, cols), "float32"))
    alloc = allocate(low, TARGETS["trn2"])
    assert all(p.buffers == 1 for p in alloc.placements.values() if p.buffer == "sbuf")
    assert_no_live_overlap(low, "trn2")
