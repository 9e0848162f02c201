"""Event-driven list scheduling of an instruction stream onto the engines and DMA queues of one NeuronCore.

Each compute engine runs its instructions in program order, one at a time (its own sequencer, §1.1). An
instruction starts when its engine is free and every buffer region it touches is ready: the last writer of what
it reads has finished (RAW), and the last writer and readers of what it writes have finished (WAW, WAR). Engines
run in parallel, so independent work (a load for iteration k+1, a matmul of iteration k) overlaps; rotating
buffer copies decide how far ahead a producer may run.

DMA (§3.4): transfers are spread round-robin over 16 queues, in order within a queue. A transfer first pays its
fixed cost (descriptor setup and semaphore wait), which overlaps with other queues' transfers, then streams its
payload over ``dma_engines`` of the 16 DMA engines, whose shared bandwidth (``dma_pool``) bounds many concurrent
transfers. The queue is busy from the start of the fixed cost to the payload's end.

Each instruction records the instruction that set its start (engine predecessor, data producer, or the DMA
engine it waited for), which is how the profile walks the critical path back from the end.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from nki_dsl.backends.simulator.deps import DependenceTracker
from nki_dsl.backends.simulator.dma_pool import DmaPool
from nki_dsl.backends.simulator.engines import DMA, ENGINES

DMA_QUEUES = 16  # queues used round-robin (§3.4: "round-robin across queues"); one timeline each in the trace


@dataclass
class Schedule:
    """Per instruction (parallel arrays, in issue order): template index, unit, start/end (ns), predecessor (-1
    none). ``units`` names the timelines: the compute engines, then ``dma0``..``dma15``."""

    templates: list
    template: array
    unit: array
    start: array
    end: array
    pred: array
    units: tuple[str, ...]
    dma_engine_busy_ns: float  # sum over the 16 DMA engines of time spent streaming payload

    def __len__(self) -> int:
        return len(self.template)


def schedule(instructions, target, untracked: set[int] = frozenset(), dma_queues: int = DMA_QUEUES) -> Schedule:
    """Schedule ``instructions`` — an iterable of ``(template, reads, writes)`` — on ``target``."""
    units = ENGINES + tuple(f"dma{q}" for q in range(dma_queues))
    engine_index = {e: k for k, e in enumerate(ENGINES)}
    n_units = len(units)
    free = [0.0] * n_units
    last = [-1] * n_units
    pool = DmaPool(target.dma_engines)  # the DMA engines streaming payloads
    tracker = DependenceTracker(untracked)
    ready, commit = tracker.ready, tracker.commit
    templates: list = []
    tindex: dict[int, int] = {}
    t_arr, u_arr, s_arr, e_arr, p_arr = array("l"), array("b"), array("d"), array("d"), array("l")
    queue = 0
    dma_busy = 0.0
    n_engines = len(ENGINES)
    for ident, (tmpl, reads, writes) in enumerate(instructions):
        k = tindex.get(id(tmpl))
        if k is None:
            k = tindex[id(tmpl)] = len(templates)
            templates.append(tmpl)
        if tmpl.engine == DMA:
            u = n_engines + queue
            queue = (queue + 1) % dma_queues
        else:
            u = engine_index[tmpl.engine]
        start, pred = free[u], last[u]
        if reads or writes:
            t, who = ready(reads, writes)
            if t > start:
                start, pred = t, who
        if u >= n_engines:
            # fixed cost, then the payload on the `dma_engines` DMA engines that free up first
            n = tmpl.dma_engines
            stream_start, who = pool.book(start + tmpl.fixed_ns, tmpl.payload_ns, n, ident)
            end = stream_start + tmpl.payload_ns
            if who >= 0 and e_arr[who] <= end:  # the bandwidth was the bottleneck; (fluid sharing may overlap)
                pred = who
            dma_busy += n * tmpl.payload_ns
        else:
            end = start + tmpl.duration_ns
        free[u] = end
        last[u] = ident
        if reads or writes:
            commit(reads, writes, end, ident)
        t_arr.append(k)
        u_arr.append(u)
        s_arr.append(start)
        e_arr.append(end)
        p_arr.append(pred)
    return Schedule(templates, t_arr, u_arr, s_arr, e_arr, p_arr, units, dma_busy)
