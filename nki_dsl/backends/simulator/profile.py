"""What a simulated run reports: modelled latency, busy time per engine and DMA queue, FLOPs and bytes, roofline
position and the critical path; a ``rich`` summary, a Chrome trace, and before/after comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from nki_dsl.backends.simulator import chrome_trace
from nki_dsl.backends.simulator.units import ENGINES
from nki_dsl.targets import Target


class Step(NamedTuple):
    """One instruction on the critical path. (A named tuple: a long path has one per instruction on it, and a
    tuple is built several times faster than a frozen dataclass.)"""

    index: int
    opcode: str
    unit: str
    start_ns: float
    end_ns: float
    loc: str


@dataclass
class Profile:
    kernel: str
    target: Target
    latency_ns: float
    instructions: int
    unit_busy_ns: dict[str, float]  # every engine and DMA queue, including idle ones
    dma_engine_busy_ns: float  # summed over the DMA engines (payload streaming only)
    flops: float
    tensor_flops: float
    bytes_moved: int  # all DMA traffic
    hbm_bytes: int  # DMA traffic to or from HBM
    schedule: object = field(repr=False, default=None)
    # Time the Tensor engine would need at its peak rate for each matmul's operand dtype (FP8 on NC-v3 peaks at
    # twice the BF16 rate, in double-row mode, §3.1): what utilisation is measured against, so an FP8 kernel cannot
    # exceed 100% (and one that does not use double row reaches at most half).
    tensor_ideal_ns: float = 0.0
    # summed over the DMA engines: their occupancy, streaming or the fixed costs they could not stream behind (§3.4:
    # one transfer at a time, its fixed cost while the one before it streams)
    dma_occupancy_ns: float = 0.0
    # computed from ``schedule`` when first asked for (a long kernel's path has an entry per instruction on it)
    _critical_path: list | None = field(default=None, repr=False, compare=False)
    _unit_split: dict | None = field(default=None, repr=False, compare=False)

    @property
    def critical_path(self) -> list[Step]:
        """The chain of instructions that set the end time (``critical_path``)."""
        if self._critical_path is None:
            self._critical_path = critical_path(self.schedule) if self.schedule is not None else []
        return self._critical_path

    @property
    def unit_split(self) -> dict[str, dict[str, float]]:
        """unit -> {"useful", "overhead", "contention", "waiting"} ns (``busy_split``): see ``split_busy``."""
        if self._unit_split is None:
            self._unit_split = split_busy(self.schedule) if self.schedule is not None else {}
        return self._unit_split

    # -- derived figures ----------------------------------------------------------------------------------------
    @property
    def latency_us(self) -> float:
        return self.latency_ns / 1000.0

    @property
    def engine_busy(self) -> dict[str, float]:
        """Busy fraction of the latency per compute engine, and ``dma``: the fraction of the DMA engines' combined
        time they were occupied, streaming payload or paying the fixed costs of transfers too short to hide the next
        one's (how close the kernel runs to what the DMA engines can do; ``dma_streaming`` is the streaming part)."""
        t = max(self.latency_ns, 1e-9)
        out = {e: self.unit_busy_ns.get(e, 0.0) / t for e in ENGINES}
        out["dma"] = max(self.dma_occupancy_ns, self.dma_engine_busy_ns) / (self.target.dma_engines * t)
        return out

    @property
    def dma_queue_busy(self) -> dict[str, float]:
        t = max(self.latency_ns, 1e-9)
        return {u: b / t for u, b in self.unit_busy_ns.items() if u.startswith("dma")}

    @property
    def busy_split(self) -> dict[str, dict[str, float]]:
        """Per engine and DMA queue that ran something, why its time went: ``useful`` (the work itself: elements at
        the engine's rate, a DMA's bytes at the engines' peak), ``overhead`` (fixed costs: the MIN_II floor,
        MM_INIT_LATENCY, static and access overheads, GPSIMD_START; a DMA's fixed cost and per-descriptor costs),
        ``contention`` (a DMA queue waiting for the DMA engines other queues are using) — these three add up to
        the unit's busy time — and ``waiting``: idle time before an instruction whose inputs were not ready yet
        (dependencies, a shared buffer port, a DGE instance), not counting the idle tail after its last one."""
        return {u: dict(v) for u, v in self.unit_split.items()}

    @property
    def dma_streaming(self) -> float:
        """Fraction of the DMA engines' combined time spent streaming (descriptors and bytes)."""
        return self.dma_engine_busy_ns / (self.target.dma_engines * max(self.latency_ns, 1e-9))

    @property
    def bottleneck(self) -> str:
        busy = self.engine_busy
        return max(busy, key=busy.get)

    @property
    def tensor_peak_flops_per_ns(self) -> float:
        return self.target.tensor_peak_flops_per_ns

    @property
    def memory_bytes_per_ns(self) -> float:
        """The memory roof: the DMA engines' aggregate peak, or the core's share of HBM if that is lower (§3.4)."""
        return min(self.target.dma_bytes_per_ns, self.target.hbm_bytes_per_ns_per_core)

    @property
    def tensor_engine_utilisation(self) -> float:
        return self.tensor_ideal_ns / max(self.latency_ns, 1e-9)

    @property
    def hbm_bandwidth_fraction(self) -> float:
        return self.hbm_bytes / (max(self.latency_ns, 1e-9) * self.memory_bytes_per_ns)

    @property
    def arithmetic_intensity(self) -> float:
        """Tensor-engine FLOPs per HBM byte; above the ridge point the kernel can be compute-bound."""
        return self.tensor_flops / max(self.hbm_bytes, 1)

    @property
    def ridge_point(self) -> float:
        return self.tensor_peak_flops_per_ns / self.memory_bytes_per_ns

    @property
    def roofline_bound(self) -> str:
        return "compute" if self.arithmetic_intensity >= self.ridge_point else "memory"

    # -- output -------------------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        # One line for a REPL; summary() is the full table.
        return (f"<Profile {self.kernel} on {self.target.name}: {self.latency_us:,.1f} us, {self.instructions:,} "
                f"instructions, bound by {self.bottleneck}, Tensor engine {self.tensor_engine_utilisation:.1%}>")

    def save_trace(self, path) -> None:
        chrome_trace.save(self.schedule, self.kernel, path)

    def summary(self, console=None, path_steps: int = 8) -> None:
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        head = Table(title=f"{self.kernel} on {self.target.name}: {self.latency_us:.3f} us modelled, "
                     f"{self.instructions} instructions")  # fmt: skip
        head.add_column("engine")
        head.add_column("busy (us)", justify="right")
        head.add_column("busy %", justify="right")
        for c in ("useful (us)", "overhead (us)", "contention (us)", "waiting on deps (us)"):
            head.add_column(c, justify="right")
        busy = self.engine_busy
        split = self.unit_split

        def parts(u):
            d = split.get(u, {})
            return [f"{d.get(k, 0.0) / 1000:.3f}" for k in ("useful", "overhead", "contention", "waiting")]

        for e in ENGINES:
            head.add_row(e, f"{self.unit_busy_ns.get(e, 0.0) / 1000:.3f}", f"{100 * busy[e]:.1f}", *parts(e))
        queues = [u for u, b in self.unit_busy_ns.items() if u.startswith("dma") and b > 0]
        for u in queues:
            head.add_row(u, f"{self.unit_busy_ns[u] / 1000:.3f}", f"{100 * self.dma_queue_busy[u]:.1f}", *parts(u))
        engines = self.target.dma_engines
        occupied = max(self.dma_occupancy_ns, self.dma_engine_busy_ns)
        head.add_row(f"dma ({engines} engines)", f"{occupied / 1000 / engines:.3f}", f"{100 * busy['dma']:.1f}",
                     f"{self.dma_engine_busy_ns / 1000 / engines:.3f} streaming", "", "", "")
        head.add_row(f"dma queues used: {len(queues)}", "", "", "", "", "", "")
        console.print(head)
        facts = Table(title="roofline")
        facts.add_column("figure")
        facts.add_column("value", justify="right")
        facts.add_row("FLOPs (Tensor engine / all)", f"{self.tensor_flops:.4g} / {self.flops:.4g}")
        facts.add_row("bytes moved (HBM / all DMA)", f"{self.hbm_bytes:,} / {self.bytes_moved:,}")
        facts.add_row("Tensor-engine utilisation", f"{100 * self.tensor_engine_utilisation:.1f} %")
        facts.add_row("HBM bandwidth fraction", f"{100 * self.hbm_bandwidth_fraction:.1f} %")
        facts.add_row("arithmetic intensity (FLOP/B)", f"{self.arithmetic_intensity:.1f} "
                      f"(ridge {self.ridge_point:.1f}: {self.roofline_bound}-bound)")  # fmt: skip
        facts.add_row("busiest engine", self.bottleneck)
        console.print(facts)
        path = Table(title=f"critical path ({len(self.critical_path)} instructions, last {path_steps})")
        for c in ("#", "instruction", "unit", "start (us)", "end (us)", "source"):
            path.add_column(c)
        for s in self.critical_path[-path_steps:]:
            path.add_row(str(s.index), s.opcode, s.unit, f"{s.start_ns / 1000:.3f}", f"{s.end_ns / 1000:.3f}", s.loc)
        console.print(path)

    def compare(self, other: Profile) -> dict[str, tuple[float, float, float]]:
        """``figure -> (self, other, other / self)`` for latency, busy fractions and roofline fractions."""
        rows = {"latency_us": (self.latency_us, other.latency_us)}
        for e, v in self.engine_busy.items():
            rows[f"busy_{e}"] = (v, other.engine_busy[e])
        rows["tensor_engine_utilisation"] = (self.tensor_engine_utilisation, other.tensor_engine_utilisation)
        rows["hbm_bandwidth_fraction"] = (self.hbm_bandwidth_fraction, other.hbm_bandwidth_fraction)
        rows["instructions"] = (self.instructions, other.instructions)
        return {k: (a, b, (b / a) if a else float("inf")) for k, (a, b) in rows.items()}


def build(kernel_name: str, target: Target, sched) -> Profile:
    """Fold a ``Schedule`` into a ``Profile``."""
    n = len(sched)
    templates = sched.templates
    busy = dict.fromkeys(sched.units, 0.0)
    per_template = [0] * len(templates)
    end = sched.end
    if n:  # in C; bincount adds each unit's durations in issue order, as a Python loop would: the same sums
        units = np.frombuffer(sched.unit, dtype=np.int8)
        span = np.frombuffer(end, dtype=np.float64) - np.frombuffer(sched.start, dtype=np.float64)
        unit_busy = np.bincount(units, weights=span, minlength=len(sched.units)).tolist()
        which = np.frombuffer(sched.template, dtype=f"i{sched.template.itemsize}")
        per_template = np.bincount(which, minlength=len(templates)).tolist()
        for u, b in zip(sched.units, unit_busy):
            busy[u] = b
    flops = sum(c * t.flops for c, t in zip(per_template, templates))
    tflops = sum(c * t.tensor_flops for c, t in zip(per_template, templates))
    nbytes = sum(c * t.nbytes for c, t in zip(per_template, templates))
    hbm = sum(c * t.hbm_bytes for c, t in zip(per_template, templates))
    bf16_peak = target.tensor_peak_flops_per_ns
    fp8_speedup = target.tensor_fp8_input_elems_per_cycle / target.tensor_input_elems_per_cycle
    mx_speedup = target.tensor_mx_speedup  # §3.1: 4x the BF16 rate on trn3
    ideal = sum(c * t.tensor_flops / (bf16_peak * (mx_speedup if t.mx_operands else
                                                   fp8_speedup if t.fp8_operands else 1.0))
                for c, t in zip(per_template, templates))  # fmt: skip
    latency = max(end) if n else 0.0
    return Profile(kernel_name, target, latency, n, busy, sched.dma_engine_busy_ns, flops, tflops, nbytes, hbm,
                   sched, ideal, sched.dma_occupancy_ns)  # fmt: skip


def split_busy(sched) -> dict[str, dict[str, float]]:
    """``Profile.busy_split`` from a Schedule: per-instruction useful and fixed parts come from its template; a DMA
    queue's time past its fixed cost and busiest-engine time is contention for the engines; the gaps on a unit
    before each of its instructions are waiting (units run their instructions in order, so an instruction that
    starts after its predecessor on the unit ended was waiting for its inputs)."""
    n = len(sched)
    if not n:
        return {}
    templates = sched.templates
    which = np.frombuffer(sched.template, dtype=f"i{sched.template.itemsize}")
    units = np.frombuffer(sched.unit, dtype=np.int8).astype(np.int64)
    start = np.frombuffer(sched.start, dtype=np.float64)
    end = np.frombuffer(sched.end, dtype=np.float64)
    useful_t = np.array([t.useful_ns for t in templates])
    # a compute instruction's whole span is its own (an exposed LoadStationary included); a DMA's span past its
    # fixed cost and busiest-engine time is contention for the engines
    work_t = np.array([t.fixed_ns + t.payload_ns if t.engine == "dma" else np.inf for t in templates])
    nu = len(sched.units)
    span = np.bincount(units, weights=end - start, minlength=nu)
    useful = np.bincount(units, weights=useful_t[which], minlength=nu)
    work = np.bincount(units, weights=np.minimum(work_t[which], end - start), minlength=nu)
    order = np.argsort(units, kind="stable")  # per unit, in issue order (= its execution order)
    u_sorted, s_sorted, e_sorted = units[order], start[order], end[order]
    prev_end = np.empty_like(e_sorted)
    prev_end[0] = 0.0
    prev_end[1:] = e_sorted[:-1]
    first = np.ones(n, dtype=bool)
    first[1:] = u_sorted[1:] != u_sorted[:-1]
    prev_end[first] = 0.0
    waiting = np.bincount(u_sorted, weights=np.maximum(0.0, s_sorted - prev_end), minlength=nu)
    out = {}
    for k, name in enumerate(sched.units):
        if span[k] <= 0 and waiting[k] <= 0:
            continue
        out[name] = {"useful": float(useful[k]), "overhead": float(max(0.0, work[k] - useful[k])),
                     "contention": float(max(0.0, span[k] - work[k])), "waiting": float(waiting[k])}  # fmt: skip
    return out


def critical_path(sched) -> list[Step]:
    """The chain of instructions that set the end time: from the last to finish, follow recorded predecessors."""
    if not len(sched):
        return []
    end, start, template, unit, pred = sched.end, sched.start, sched.template, sched.unit, sched.pred
    k = max(range(len(end)), key=end.__getitem__)
    ks = []
    while k >= 0:
        ks.append(k)
        k = pred[k]
    ks.reverse()
    # a long path repeats few templates: format each one's opcode and source location once
    names = {j: (sched.templates[j].opcode, str(sched.templates[j].loc)) for j in {template[k] for k in ks}}
    units = sched.units
    out = []
    for k in ks:
        opcode, loc = names[template[k]]
        out.append(Step(k, opcode, units[unit[k]], start[k], end[k], loc))
    return out
