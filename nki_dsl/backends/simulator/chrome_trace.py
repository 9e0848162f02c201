"""The schedule as Chrome-trace JSON (opens in Perfetto and chrome://tracing): one track per engine and DMA queue
that ran something, one complete ("X") event per instruction (category ``instruction``), times in microseconds as
the format requires.

The Profile's busy-time split shows on the tracks too: each instruction's event carries its ``useful_ns`` and
``overhead_ns``; a DMA transfer has two nested slices, ``fixed cost`` and ``stream``, drawn where the transfer held
the DMA engines: its fixed cost right before its bytes stream (the time before them on its queue is contention for
the engines, which run one transfer's fixed cost at a time, reference/nki.md §3.4); and the idle time before an
instruction that waited for its inputs is a ``waiting`` slice naming the instruction it waited for."""

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
    last_end = dict.fromkeys(used, 0.0)
    for k in range(len(schedule)):
        ti = schedule.template[k]
        t = templates[ti]
        u = schedule.unit[k]
        start, end = schedule.start[k], schedule.end[k]
        if start > last_end[u]:
            pred = schedule.pred[k]
            why = names[schedule.template[pred]] if pred >= 0 else "start"
            events.append({"ph": "X", "pid": 0, "tid": u, "name": "waiting", "cat": "waiting",
                           "ts": last_end[u] / 1000.0, "dur": (start - last_end[u]) / 1000.0,
                           "args": {"for": k, "on": why, "pred": pred}})  # fmt: skip
        last_end[u] = end
        work = t.fixed_ns + t.payload_ns if t.engine == "dma" else end - start
        events.append({
            "ph": "X", "cat": "instruction", "pid": 0, "tid": u, "name": names[ti], "ts": start / 1000.0,
            "dur": (end - start) / 1000.0,
            "args": {"id": k, "loc": locs[ti], "pred": schedule.pred[k], "useful_ns": t.useful_ns,
                     "overhead_ns": max(0.0, min(work, end - start) - t.useful_ns)},
        })  # fmt: skip
        if t.engine == "dma":
            f0 = max(start, end - t.payload_ns - t.fixed_ns)
            events.append({"ph": "X", "pid": 0, "tid": u, "name": "fixed cost", "cat": "dma split",
                           "ts": f0 / 1000.0, "dur": min(t.fixed_ns, end - f0) / 1000.0,
                           "args": {"id": k}})  # fmt: skip
            s0 = max(f0 + t.fixed_ns, end - t.payload_ns)
            events.append({"ph": "X", "pid": 0, "tid": u, "name": "stream", "cat": "dma split", "ts": s0 / 1000.0,
                           "dur": (end - s0) / 1000.0, "args": {"id": k, "descriptors": t.dma_descriptors}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def save(schedule, kernel_name: str, path) -> None:
    with open(path, "w") as f:
        json.dump(trace_events(schedule, kernel_name), f)
