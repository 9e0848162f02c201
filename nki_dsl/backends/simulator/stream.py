"""Unroll lowered, allocated IR into the instruction stream the scheduler runs.

Each instruction op of the lowered kernel (``passes.engines.engine_of`` names its engine; ``alloc``, ``assign``
and views issue nothing) gets a template once (``templates.py``). Unrolling is generated Python: one function per
kernel whose nested ``for`` loops mirror the IR's and which calls ``step(template, reads, writes)`` per
instruction, with the regions (``addresses.py``) written out as integer arithmetic on the loop variables. So the
per-instruction cost is a call and a few additions, not an interpretation of the IR (as the NumPy backend
generates source rather than walking the IR). A loop ``loop_facts.py`` finds regular enough takes its iteration
values from ``_enter(k, outer)`` (``steady.py``, which may skip iterations it writes down by arithmetic; plain
``range`` when a run does not ask for it), and gets a ``_replay<k>`` function listing its moving HBM tiles' regions.

Whether a Vector or Scalar instruction reads what the previous instruction on its engine wrote (the static
overhead of dependent instructions, ``cost.overhead_cycles``) is decided per executed instruction from the regions
both touch: across a loop's back-edge the previous instruction of an iteration's first one is the previous
iteration's last, which no static look at one loop body can see. What another engine overwrote since is no
longer that instruction's output (a PSUM tile zeroed by the Vector engine, accumulated by the Tensor engine, then
copied out by the Vector engine: the copy waits for the matmuls, not on its own engine's pipeline).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product

from nki_dsl.backends.simulator.addresses import AddressMap
from nki_dsl.backends.simulator.cost import STATIC_OVERHEAD_ENGINES
from nki_dsl.backends.simulator.loop_facts import LoopFacts, eligible_loops, is_clipped
from nki_dsl.backends.simulator.templates import MaskShrink, OpTemplate, build_template
from nki_dsl.errors import NkiError
from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.ir.ops.collectives import SYNC_OPS
from nki_dsl.ir.source_safe import py_int, py_var
from nki_dsl.passes.engines import engine_of, fused_writes
from nki_dsl.targets import Target

_LAST = {e: k for k, e in enumerate(sorted(STATIC_OVERHEAD_ENGINES))}  # engine -> slot of its last writes


def _hits(reads, writes) -> bool:
    """Some region read overlaps some region written (same key, boxes intersect)."""
    for key, b in reads:
        for key2, c in writes:
            if key == key2:
                if len(b) == 4:  # the on-chip (partition, byte) boxes: written out
                    if b[0] < c[1] and c[0] < b[1] and b[2] < c[3] and c[2] < b[3]:
                        return True
                elif all(b[k] < c[k + 1] and c[k] < b[k + 1] for k in range(0, len(b), 2)):
                    return True
    return False


def runtime_trips(loops: list[Loop], recorded: dict | None):
    """``_trips(k, program ids)`` of the generated unroller: runtime loop ``k``'s trip count at its next entry (a
    scalar_offset loop's index; a timing-only run takes the first of its range)."""
    if recorded is None:
        return lambda k, pids: loops[k].start if loops[k].kind == "scalar_offset" else loops[k].trip_count
    queues = {key: iter(counts) for key, counts in recorded.items()}

    def trips(k, pids):
        n = next(queues.get((k, pids), iter(())), None)
        if n is None:
            lp = loops[k]
            raise NkiError(f"the simulator has no recorded trip count for this entry of loop {lp.var} (the NumPy "
                           f"run it prices did not reach it)", lp.loc)  # fmt: skip
        return n

    return trips


class Stream:
    """The instruction stream of lowered ``kernel`` placed by ``allocation`` on ``target``. ``run(step)`` calls
    ``step(template, reads, writes)`` for every instruction of every grid instance (or only ``grid``)."""

    def __init__(self, kernel: Kernel, allocation, target: Target, grid=None):
        self.kernel = kernel
        self.target = target
        self.addresses = AddressMap(kernel, allocation)
        self.fused = fused_writes(kernel)
        self.assigns = set(map(id, self.fused.values()))
        self.templates: list[OpTemplate] = []
        # the regions the last instruction on each static-overhead engine wrote, while the stream runs
        self.namespace: dict[str, object] = {"_hits": _hits, "_LW": [()] * len(_LAST)}
        self.written_hbm: set[int] = set()
        self.has_sync = False  # a sync op makes ``unroll`` a generator: run it with ``program`` (``cores.py``)
        grid_shape = kernel.grid or (1,)
        self.pids = [f"pid{k}" for k in range(len(grid_shape))]
        self.instances = list(product(*(range(g) for g in grid_shape))) if grid is None else [tuple(grid)]
        self.lines = [f"def unroll(step, {', '.join(self.pids)}):"]
        self._open: list[LoopFacts] = []  # the loops being generated, outermost first
        self.runtime_loops: list[Loop] = []  # numbered in program order, as the NumPy reference's TripLog
        self._register_reads: list = []  # registers of the runtime loops whose body's first instruction is next
        self.loops: list[LoopFacts] = []
        self._per_instance = self._body(kernel.body, 1)
        # loops whose iterations may be advanced whole once the schedule repeats (steady.py): their ``for`` takes
        # its values from ``_enter`` (plain ``range`` unless a run asks for it)
        # (a loop holding a sync op cannot be advanced by arithmetic: each of its meetings waits for the peer core)
        self.steady = {k: lf for k, lf in eligible_loops(self, self.loops).items()
                       if not any(op.name in SYNC_OPS for op, _, _ in lf.instructions)}  # fmt: skip
        for k, lf in self.steady.items():
            outer = "".join(f"{py_var(v)}, " for v in lf.outer)
            self.lines[lf.line] = f"{lf.pad}for {py_var(lf.loop.var, 'loop')} in _enter({py_int(k)}, ({outer})):"
            self.lines += lf.replay_lines
        self.source = "\n".join(self.lines) + "\n"
        # no IR text reaches the source: loop variables and bounds are checked (ir/source_safe.py)
        exec(compile(self.source, "<simulator stream>", "exec"), self.namespace)
        self._unroll = self.namespace["unroll"]

    # -- generating the unroller ---------------------------------------------------------------------------------
    def _body(self, body: list, depth: int) -> int:
        """Emit ``body``; returns its instruction count per execution (masks not applied)."""
        pad = "    " * depth
        count = 0
        start = len(self.lines)
        for stmt in body:
            if isinstance(stmt, Loop):
                bounds = ", ".join(py_int(b) for b in (stmt.start, stmt.stop, stmt.step))
                iterable = None
                if stmt.runtime:  # as many iterations as the run took (runtime_loops.py)
                    pids = "(" + "".join(f"{py_var(p)}, " for p in self.pids) + ")"
                    trips = f"_trips({py_int(len(self.runtime_loops))}, {pids})"
                    bounds = f"{py_int(stmt.start)}, {py_int(stmt.start)} + {py_int(stmt.step)} * {trips}, "
                    bounds += py_int(stmt.step)
                    if stmt.kind == "scalar_offset":  # one iteration, at the index the run read
                        iterable = f"({trips},)"
                    self.runtime_loops.append(stmt)
                    self._register_reads.append(stmt.reads)
                lf = LoopFacts(stmt, len(self.lines), pad, tuple(self.pids) + tuple(o.loop.var for o in self._open))
                self.loops.append(lf)
                self.lines.append(f"{pad}for {py_var(stmt.var, 'loop')} in {iterable or f'range({bounds})'}:")
                self._open.append(lf)
                lf.per_iteration = self._body(stmt.body, depth + 1)
                self._open.pop()
                count += len(range(stmt.start, stmt.stop, stmt.step)) * lf.per_iteration
                continue
            engine = engine_of(stmt)
            if engine is None:
                if stmt.name == "assign" and id(stmt) not in self.assigns:
                    raise ValueError(f"{stmt.loc}: assign follows no instruction: the kernel is not lowered")
                continue
            count += 1
            self._instruction(stmt, engine, pad)
        if len(self.lines) == start:
            self.lines.append(f"{pad}pass")
        return count

    def _instruction(self, op: Op, engine: str, pad: str) -> None:
        write = self.fused.get(op)
        t = build_template(op, engine, self.target, write)
        t.index = len(self.templates)
        self.templates.append(t)
        for lf in self._open:
            lf.instructions.append((op, write, t))
        for a in t.writes:
            if not a.tensor.type.buffer.on_chip:
                self.written_hbm.add(self.addresses.key_of(a.tensor.name))
        clip = is_clipped(op, write)
        r = "(" + "".join(self.addresses.source(a, clip) + ", " for a in t.reads)
        # the first instruction of a runtime loop's body waits for its register (the sequencer reads it there)
        r += "".join(self.addresses.source(a, False) + ", " for a in self._register_reads) + ")"
        self._register_reads = []
        w = "".join(self.addresses.source(a, clip) + ", " for a in t.writes)
        first = write.attrs.get("zero_first", "") if write is not None else ""
        if first:  # the first iteration overwrites (no nl.zeros before it): it does not read the accumulator,
            # which ``operand_reads`` lists last
            lp = self.addresses.loops[first]
            r0 = "(" + "".join(self.addresses.source(a, clip) + ", " for a in t.reads[:-1]) + ")"
            r = f"({r0} if {py_var(first, 'loop')} == {py_int(lp.start)} else {r})"
        name = f"T{t.index}"
        self.namespace[name] = t
        if op.name in SYNC_OPS:  # the core pauses here until its peer meets it (``cores.py``); never masked
            self.has_sync = True
            self.lines.append(f"{pad}yield ({name}, {r}, ({w}))")
            return
        if op.mask is not None or "reduce_mask" in op.attrs:
            shrink = MaskShrink(op, t, self.target)
            self.namespace[f"M{t.index}"] = shrink
            values = "".join(f"{v}, " for v in shrink.rests)
            self.lines.append(f"{pad}_t = M{t.index}(({values}))")
            self.lines.append(f"{pad}if _t is not None:")
            name, pad = "_t", pad + "    "
        slot = _LAST.get(engine)
        others = [k for k in _LAST.values() if k != slot] if any(a.tensor.type.buffer.on_chip for a in t.writes) else []
        if slot is None and not others:
            self.lines.append(f"{pad}step({name}, {r}, ({w}))")
            return
        self.lines.append(f"{pad}_rd, _wr = {r}, ({w})")
        if slot is None:
            self.lines.append(f"{pad}step({name}, _rd, _wr)")
        else:
            self.lines.append(f"{pad}step({name}.if_dependent if _hits(_rd, _LW[{slot}]) else {name}, _rd, _wr)")
            self.lines.append(f"{pad}_LW[{slot}] = _wr")
        for k in others:  # overwritten by another engine: no longer the last output of that engine
            self.lines.append(f"{pad}if _LW[{k}] and _hits(_wr, _LW[{k}]): _LW[{k}] = ()")

    # -- running ---------------------------------------------------------------------------------------------------
    def run(self, step, steady=None, trips=None) -> None:
        """``steady``: a ``steady.Steady`` that may advance whole loop iterations (None: every instruction).
        ``trips``: the runtime loops' trip counts a NumPy reference run recorded (``TripLog.counts``); None (a
        timing-only run, with no data) runs each to its declared bound, the slowest run it allows."""
        if self.has_sync:
            raise ValueError("a stream with sync ops runs per core, through Stream.program (simulator/cores.py)")
        self._prepare(steady, trips)
        for inst in self.instances:
            self._unroll(step, *inst)

    def program(self, step, steady=None, trips=None):
        """The one grid instance of this stream as a generator: it calls ``step`` per instruction and yields
        ``(template, reads, writes)`` at each sync op, for the driver to schedule when the peer core is there."""
        (inst,) = self.instances
        self._prepare(steady, trips)
        return self._unroll(step, *inst)

    def _prepare(self, steady, trips) -> None:
        self.namespace["_LW"][:] = [()] * len(_LAST)  # no previous instruction yet
        self.namespace["_trips"] = runtime_trips(self.runtime_loops, trips)
        loops = self.steady
        self.namespace["_enter"] = steady.enter if steady is not None else (
            lambda k, outer: range(loops[k].loop.start, loops[k].loop.stop, loops[k].loop.step))  # fmt: skip

    def raw(self) -> Iterator[tuple]:
        """``(template, reads, writes)`` per instruction (materialised; for tests and small kernels)."""
        out: list[tuple] = []
        self.run(lambda t, r, w: out.append((t, r, w)))
        return iter(out)

    def count(self) -> int:
        """Number of instructions without unrolling masks (an upper bound where masks drop instructions)."""
        return len(self.instances) * self._per_instance

    def untracked(self) -> set[int]:
        """Region keys nothing writes (kernel inputs in HBM): reading them never waits, so the scheduler skips
        them. On-chip address spaces are always tracked."""
        return set(self.addresses.keys.values()) - self.written_hbm
