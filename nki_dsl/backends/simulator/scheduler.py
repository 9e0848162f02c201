"""Event-driven list scheduling of an instruction stream onto the engines and DMA queues of one NeuronCore.

Each compute engine runs its instructions in program order, one at a time (its own sequencer, §1.1). An
instruction starts when its engine is free and every buffer region it touches is ready: the last writer of what
it reads has finished (RAW), and the last writer and readers of what it writes have finished (WAW, WAR). Engines
run in parallel, so independent work (a load for iteration k+1, a matmul of iteration k) overlaps; rotating
buffer copies decide how far ahead a producer may run. On NC-v2 the engine pairs that cannot access SBUF or PSUM
in parallel (§3.3) also wait for each other (``OpTemplate.ports``).

DMA (§3.4): 16 queues, each in order. Queue assignment is an argued approximation of the compiler's: the queue is
fixed when the program is built, not picked at run time by which queue frees first, and the transfers are dealt to
the queues in turn in program order (round-robin), as a compiler that unrolls the kernel's loops and spreads their
DMAs over the queues does. (Binding each DMA instruction of the loop body to one queue instead would serialise a
hoisted load loop of 64 transfers on one queue, making hoisting loads no faster than reloading them, against the NKI
matmul tutorial's progression.) A transfer waits in its queue for the transfer dealt to it before (the one 16
transfers earlier) to finish: a queue works on one transfer at a time, so a transfer waiting for its data holds up
the queue (head-of-line blocking).

The DMA engines process one transfer at a time, and every transfer involves all 16 (8 partitions each, a
completion semaphore from each), so a transfer's fixed cost (descriptor setup, synchronisation, semaphore-to-start)
occupies the engines; it runs while the transfer before it streams, so it is hidden behind a transfer that
streams for longer, and never overlaps another transfer's fixed cost. That reading of §3.4 is the only one that
fits "one DMA transfer at a time", the measured 1416 ns for 32 KiB on one engine (streaming alone) and the payload
curve's "fully amortizes from 4 KiB per partition" together (docs/dma_model.md argues it). So each transfer books,
from when it is ready, its occupancy of the engines in ``dma_pool`` (shared by all queues, round-robin across
queues, §3.4): its work summed over the engines or, when that is shorter, the fixed cost on all 16 engines; its
bytes arrive once it has held the engines for the fixed cost and streamed (never faster than its busiest engine,
``OpTemplate.payload_ns``). A stream of transfers thus takes max(fixed, streaming) each, a lone one fixed +
streaming. A transfer that is ready may fill a gap before bookings made for transfers issued earlier. With the
hardware DGE the fixed cost is instead the 600 ns instruction on one of the two DGE instances shared by all queues,
and the engines are occupied only while it streams. The queue is busy from when the transfer starts to its last
byte.

Each instruction records the instruction that set its start (engine predecessor, data producer, or the DMA
engine it waited for), which is how the profile walks the critical path back from the end.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from types import SimpleNamespace

from nki_dsl.backends.simulator.deps import DependenceTracker
from nki_dsl.backends.simulator.dma_pool import DmaPool
from nki_dsl.backends.simulator.units import DMA, ENGINES


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
    dma_engine_busy_ns: float  # sum over the 16 DMA engines of time spent on transfers (descriptors and bytes)
    advanced: int = 0  # instructions written down by arithmetic in a steady state (``steady.py``), not scheduled
    # summed over the DMA engines: their occupancy, streaming or (the share not hidden behind it) fixed costs
    dma_occupancy_ns: float = 0.0

    def __len__(self) -> int:
        return len(self.template)


class Scheduler:
    """``step(template, reads, writes)`` schedules one instruction; ``finish()`` returns the ``Schedule``.
    ``cells``: fixed dependence-tracking cells per region key (the on-chip address spaces)."""

    def __init__(self, target, untracked: set[int] = frozenset(), dma_queues: int | None = None,
                 cells: dict | None = None, log: list | None = None):  # fmt: skip
        dma_queues = target.dma_queues_per_engine if dma_queues is None else dma_queues
        self.units = ENGINES + tuple(f"dma{q}" for q in range(dma_queues))
        self.templates: list = []
        self.arrays = (array("l"), array("b"), array("d"), array("d"), array("l"))
        self.dma_busy = [0.0, 0.0]  # summed over the DMA engines: streaming, occupancy (``Schedule``)
        self.state = SimpleNamespace()  # the timelines ``step`` keeps, for ``steady.py`` to compare and advance
        self.step = self._make_step(target, untracked, dma_queues, cells, log)

    def _make_step(self, target, untracked, dma_queues, cells, log):
        # A closure over locals: this runs once per instruction, so every attribute lookup saved counts.
        n_engines = len(ENGINES)
        engine_index = {e: k for k, e in enumerate(ENGINES)}
        free = [0.0] * len(self.units)
        last = [-1] * len(self.units)
        port_free, port_last = [0.0, 0.0], [-1, -1]
        pool = DmaPool(target.dma_engines)
        book = pool.book
        dge_fixed = target.dge_fixed_ns
        dge_free = [0.0] * target.dge_instances  # the hardware DGE instances (§3.4), shared by all queues
        dge_last = [-1] * target.dge_instances
        tracker = DependenceTracker(untracked, cells)
        ready, commit = tracker.ready, tracker.commit
        templates = self.templates
        t_arr, u_arr, s_arr, e_arr, p_arr = self.arrays
        t_app, u_app, s_app, e_app, p_app = t_arr.append, u_arr.append, s_arr.append, e_arr.append, p_arr.append
        dma_busy = self.dma_busy

        rr = [0]  # DMA transfers issued so far: the round-robin queue counter
        loaded = [None]  # the region of the stationary tile the Tensor engine holds
        first_read = tracker.first_read
        te_start = [0.0]  # when the Tensor engine's latest instruction started multiplying
        tensor = engine_index["tensor"]
        info: dict[int, tuple] = {}  # id(template) -> what step needs of it, looked up once per template
        log_app = log.append if log is not None else None  # (reads, writes) per scheduled instruction
        self.state.__dict__.update(free=free, last=last, port_free=port_free, port_last=port_last, pool=pool,
                                   dge_free=dge_free, dge_last=dge_last, tracker=tracker, rr=rr, loaded=loaded,
                                   te_start=te_start, n_engines=n_engines, dma_queues=dma_queues)  # fmt: skip

        def step(tmpl, reads, writes):
            ident = len(t_arr)
            got = info.get(id(tmpl))
            if got is None:
                if tmpl.engine == DMA:
                    payload = tmpl.payload_ns
                    dge = bool(dge_free) and getattr(tmpl, "dge", False) and dge_fixed is not None
                    # engines' worth of the pool's bandwidth: the transfer's occupancy of the engines (its work
                    # summed over the engines or, when that is shorter, the fixed cost on all of them: the next
                    # transfer's fixed cost runs while this one streams, one at a time; module docstring),
                    # spread over the busiest engine's time
                    occupancy = tmpl.dma_engine_total_ns
                    if not dge:
                        occupancy = max(occupancy, tmpl.fixed_ns * target.dma_engines)
                    n = occupancy / payload if payload > 0 else 0.0
                    streaming = tmpl.dma_engine_total_ns
                    got = (len(templates), n_engines, tmpl.ports, tmpl.duration_ns, tmpl.fixed_ns, payload, n,
                           dge, streaming)  # fmt: skip
                else:
                    got = (len(templates), engine_index[tmpl.engine], tmpl.ports, tmpl.duration_ns, 0.0, 0.0, 0,
                           False, getattr(tmpl, "load_stationary_ns", 0.0))  # fmt: skip
                info[id(tmpl)] = got
                templates.append(tmpl)
            k, u, ports, duration, fixed, payload, n, dge, ls = got
            if u >= n_engines:  # the next queue in turn (see the module docstring)
                u = n_engines + rr[0] % dma_queues
                rr[0] += 1
            start, pred = free[u], last[u]
            if reads or writes:
                t, who = ready(reads, writes)
                if t > start:
                    start, pred = t, who
            if ports:
                for p in ports:
                    if port_free[p] > start:
                        start, pred = port_free[p], port_last[p]
            if u >= n_engines:
                if dge:  # the fixed cost is the DGE instruction, on the first DGE instance to free up
                    d = dge_free.index(min(dge_free))
                    if dge_free[d] > start:
                        start, pred = dge_free[d], dge_last[d]
                    dge_free[d], dge_last[d] = start + fixed, ident
                    _, end, who = book(start + fixed, payload, n, ident)  # then the payload on the engines
                else:
                    # the engines' occupancy from when the transfer is ready (its fixed cost runs while the one
                    # before it streams); the bytes stream once the fixed cost is paid
                    got_at, end, who = book(start, payload, n, ident)
                    if got_at + fixed + payload > end:
                        end = got_at + fixed + payload
                if who >= 0 and e_arr[who] <= end:  # the bandwidth was the bottleneck (fluid sharing may overlap)
                    pred = who
                dma_busy[0] += ls
                dma_busy[1] += n * payload
            else:
                if ls:
                    # A matmul. LoadStationary runs in the background from when the stationary is ready and the
                    # previous matmul started multiplying (§3.2); only what is left of it when the MultiplyMoving
                    # could start delays it, and counts as the instruction's time. The array still holds this
                    # stationary if the previous matmul read the same region and nothing wrote it since: a later
                    # write would have waited for that read (WAR), so it would end after the previous start.
                    prev = te_start[0]
                    s_ready = first_read[0]  # (reads[0] is the stationary)
                    if reads[0] == loaded[0] and s_ready <= prev:
                        done = 0.0
                    else:
                        done = (s_ready if s_ready > prev else prev) + ls
                    loaded[0] = reads[0]
                    te_start[0] = done if done > start else start
                    end = te_start[0] + duration
                else:
                    if u == tensor:  # a transpose on the array replaces the stationary it held
                        te_start[0], loaded[0] = start, None
                    end = start + duration
            free[u] = end
            last[u] = ident
            if ports:
                for p in ports:
                    port_free[p], port_last[p] = end, ident
            if reads or writes:
                commit(reads, writes, end, ident)
            if log_app is not None:
                log_app((reads, writes))
            t_app(k)
            u_app(u)
            s_app(start)
            e_app(end)
            p_app(pred)

        return step

    # -- sync ops (``cores.py``): the driver asks when an instruction could start, then holds it ----------------
    def unit_of(self, tmpl) -> int:
        """The timeline the next instruction of ``tmpl`` would go on (a DMA's: the next queue in turn)."""
        st = self.state
        if tmpl.engine == DMA:
            return st.n_engines + st.rr[0] % st.dma_queues
        return ENGINES.index(tmpl.engine)

    def arrival(self, tmpl, reads, writes) -> float:
        """When ``tmpl`` could start if it were scheduled now: its timeline free and its data ready (nothing is
        recorded)."""
        st = self.state
        start = st.free[self.unit_of(tmpl)]
        if reads or writes:
            start = max(start, st.tracker.ready(reads, writes)[0])
        return start

    def not_before(self, tmpl, t: float) -> None:
        """The next instruction of ``tmpl`` starts at ``t`` or later: its timeline waits (for the peer core)."""
        free = self.state.free
        u = self.unit_of(tmpl)
        free[u] = max(free[u], t)

    def hold_last(self, end: float, reads, writes) -> None:
        """The last scheduled instruction ends at ``end`` instead (later): its timeline and what it read and
        wrote are busy until then (a sync op waiting for the peer)."""
        st = self.state
        ident = len(self.arrays[3]) - 1
        if end <= self.arrays[3][ident]:
            return
        self.arrays[3][ident] = end
        u = self.arrays[1][ident]
        st.free[u] = max(st.free[u], end)
        if reads or writes:
            st.tracker.ready(reads, writes)
            st.tracker.commit(reads, writes, end, ident)

    def finish(self) -> Schedule:
        return Schedule(self.templates, *self.arrays, self.units, self.dma_busy[0],
                        dma_occupancy_ns=self.dma_busy[1])


def schedule(instructions, target, untracked: set[int] = frozenset(), dma_queues: int | None = None,
             cells: dict | None = None) -> Schedule:  # fmt: skip
    """Schedule ``instructions`` — an iterable of ``(template, reads, writes)`` — on ``target``."""
    s = Scheduler(target, untracked, dma_queues, cells)
    step = s.step
    for tmpl, reads, writes in instructions:
        step(tmpl, reads, writes)
    return s.finish()
