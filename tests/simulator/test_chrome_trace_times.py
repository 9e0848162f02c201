"""The Chrome trace's times are the schedule's, in microseconds: each instruction's event spans exactly its
scheduled start to end, and each track's waiting slices fill exactly the gaps between its instructions."""

import pytest

import nki_dsl as nki
from nki_dsl.backends.simulator.chrome_trace import trace_events
from tests.simulator.support import one_matmul, simulate


def test_every_event_spans_its_scheduled_times_in_microseconds():
    s = simulate(one_matmul, nki.spec((128, 128), "bfloat16"), nki.spec((128, 512), "bfloat16"))[1].schedule
    events = trace_events(s, "one_matmul")["traceEvents"]
    instructions = [e for e in events if e.get("cat") == "instruction"]
    assert len(instructions) == len(s)
    for e in instructions:
        k = e["args"]["id"]
        assert (e["ts"], e["ts"] + e["dur"]) == pytest.approx((s.start[k] / 1000, s.end[k] / 1000))
    waits = [e for e in events if e.get("cat") == "waiting"]
    assert waits  # the matmul waits for its loads, the copy for the matmul
    for e in waits:
        k = e["args"]["for"]
        assert e["ts"] + e["dur"] == pytest.approx(s.start[k] / 1000)
        earlier = [s.end[j] for j in range(k) if s.unit[j] == s.unit[k]]
        assert e["ts"] == pytest.approx(max(earlier, default=0.0) / 1000)
