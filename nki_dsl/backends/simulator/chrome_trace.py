"""The schedule as Chrome-trace JSON (opens in Perfetto and chrome://tracing): one track per engine and DMA queue
that ran something, one complete ("X") event per instruction, times in microseconds as the format requires."""

from __future__ import annotations

import json


def trace_events(schedule, kernel_name: str) -> dict:
    used = sorted(set(schedule.unit))
    events = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": f"NeuronCore: {kernel_name}"}}]
    for u in used:
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": u, "args": {"name": schedule.units[u]}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": u, "args": {"sort_index": u}})
    templates = schedule.templates
    names = [t.opcode.removeprefix("nisa.") for t in templates]
    locs = [str(t.loc) for t in templates]
    for k in range(len(schedule)):
        ti = schedule.template[k]
        start = schedule.start[k]
        events.append({
            "ph": "X", "pid": 0, "tid": schedule.unit[k], "name": names[ti], "ts": start / 1000.0,
            "dur": (schedule.end[k] - start) / 1000.0, "args": {"id": k, "loc": locs[ti], "pred": schedule.pred[k]},
        })  # fmt: skip
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def save(schedule, kernel_name: str, path) -> None:
    with open(path, "w") as f:
        json.dump(trace_events(schedule, kernel_name), f)
