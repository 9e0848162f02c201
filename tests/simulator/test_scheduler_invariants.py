"""Scheduler invariants on hypothesis-generated instruction streams: engines run one instruction at a time, no
instruction starts before the instructions it depends on (RAW/WAR/WAW on overlapping regions) finish, and the
latency lies between the critical path and the serial sum of durations."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from nki_dsl.backends.simulator.profile import build, critical_path
from nki_dsl.backends.simulator.scheduler import schedule
from nki_dsl.backends.simulator.units import DMA, ENGINES
from nki_dsl.targets import get_target
from tests.examples import examples

TARGET = get_target("trn2")


@dataclass(eq=False)
class FakeTemplate:
    engine: str
    duration_ns: float
    fixed_ns: float = 0.0
    payload_ns: float = 0.0
    dma_engines: int = 0
    dma_engine_total_ns: float = 0.0
    useful_ns: float = 0.0
    opcode: str = "fake"
    loc: str = "test"
    flops: float = 0.0
    tensor_flops: float = 0.0
    nbytes: int = 0
    hbm_bytes: int = 0
    ports: tuple = ()
    fp8_operands: bool = False
    mx_operands: bool = False


def _box(draw):
    p0 = draw(st.integers(0, 3)) * 32
    p1 = p0 + draw(st.integers(1, 4)) * 32
    f0 = draw(st.integers(0, 7)) * 64
    f1 = f0 + draw(st.integers(1, 4)) * 64
    return (p0, p1, f0, f1)


@st.composite
def instruction(draw):
    engine = draw(st.sampled_from(ENGINES + (DMA,)))
    if engine == DMA:
        fixed = draw(st.floats(0, 2000))
        payload = draw(st.floats(1, 5000))
        engines = draw(st.integers(1, 16))
        t = FakeTemplate(engine, fixed + payload, fixed, payload, engines, engines * payload)
    else:
        t = FakeTemplate(engine, draw(st.floats(1, 3000)))
    keys = st.integers(0, 3)
    reads = tuple((draw(keys), _box(draw)) for _ in range(draw(st.integers(0, 3))))
    writes = tuple((draw(keys), _box(draw)) for _ in range(draw(st.integers(0, 2))))
    return t, reads, writes


def _overlap(a, b) -> bool:
    return a[0] == b[0] and all(a[1][k] < b[1][k + 1] and b[1][k] < a[1][k + 1] for k in (0, 2))


def _depends(later, earlier) -> bool:
    _, r2, w2 = later
    _, r1, w1 = earlier
    raw = any(_overlap(r, w) for r in r2 for w in w1)
    war = any(_overlap(w, r) for w in w2 for r in r1)
    waw = any(_overlap(w, v) for w in w2 for v in w1)
    return raw or war or waw


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(instruction(), min_size=1, max_size=40))
def test_schedule_invariants(stream):
    s = schedule(stream, TARGET)
    n = len(stream)
    assert len(s) == n
    eps = 1e-6
    # one instruction at a time per engine / DMA queue, in program order
    by_unit: dict[int, list[int]] = {}
    for k in range(n):
        by_unit.setdefault(s.unit[k], []).append(k)
    for ks in by_unit.values():
        for a, b in zip(ks, ks[1:]):
            assert s.start[b] >= s.end[a] - eps
    # dependences on overlapping regions
    for j in range(n):
        for i in range(j):
            if _depends(stream[j], stream[i]):
                assert s.start[j] >= s.end[i] - eps, (i, j)
    # each instruction lasts at least its modelled duration
    for k in range(n):
        assert s.end[k] - s.start[k] >= stream[k][0].duration_ns - eps
    latency = max(s.end)
    serial = sum(t.duration_ns for t, _, _ in stream)
    # the longest chain of dependences and same-queue order, by brute force, bounds the latency from below
    longest = []
    for j in range(n):
        before = [longest[i] for i in range(j) if s.unit[i] == s.unit[j] or _depends(stream[j], stream[i])]
        longest.append(stream[j][0].duration_ns + max(before, default=0.0))
    assert max(longest) <= latency + eps
    assert latency <= serial + eps
    # the recorded critical path ends at the latency and its end times never decrease
    path = critical_path(s)
    assert path[-1].end_ns == latency
    for a, b in zip(path, path[1:]):
        assert b.end_ns >= a.end_ns - eps
    prof = build("fake", TARGET, s)
    assert all(0 <= v <= 1 + eps for v in prof.engine_busy.values())
