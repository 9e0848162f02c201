"""Unroll lowered, allocated IR into the instruction stream the scheduler runs.

Each instruction op of the lowered kernel (``passes.engines.engine_of`` names its engine; ``alloc``, ``assign``
and views issue nothing) gets a template once (``templates.py``). Unrolling is generated Python: one function per
kernel whose nested ``for`` loops mirror the IR's and which calls ``step(template, reads, writes)`` per
instruction, with the regions (``addresses.py``) written out as integer arithmetic on the loop variables. So the
per-instruction cost is a call and a few additions, not an interpretation of the IR (as the NumPy backend
generates source rather than walking the IR).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product

from nki_dsl.backends.simulator.addresses import AddressMap
from nki_dsl.backends.simulator.templates import MaskShrink, OpTemplate, build_template, operand_reads
from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.passes.engines import engine_of, fused_writes
from nki_dsl.targets import Target, get_target


class Stream:
    """The instruction stream of lowered ``kernel`` placed by ``allocation`` on ``target``. ``run(step)`` calls
    ``step(template, reads, writes)`` for every instruction of every grid instance (or only ``grid``)."""

    def __init__(self, kernel: Kernel, allocation, target: str | Target = "trn2", grid=None):
        self.kernel = kernel
        self.target = get_target(target)
        self.addresses = AddressMap(kernel, allocation)
        self.fused = fused_writes(kernel)
        self.assigns = set(map(id, self.fused.values()))
        self.templates: list[OpTemplate] = []
        self.namespace: dict[str, object] = {}
        self.written_hbm: set[int] = set()
        grid_shape = kernel.grid or (1,)
        self.pids = [f"pid{k}" for k in range(len(grid_shape))]
        self.instances = list(product(*(range(g) for g in grid_shape))) if grid is None else [tuple(grid)]
        self.lines = [f"def unroll(step, {', '.join(self.pids)}):"]
        self._per_instance = self._body(kernel.body, 1)
        self.source = "\n".join(self.lines) + "\n"
        exec(compile(self.source, f"<simulator stream: {kernel.name}>", "exec"), self.namespace)
        self._unroll = self.namespace["unroll"]

    # -- generating the unroller ---------------------------------------------------------------------------------
    def _body(self, body: list, depth: int) -> int:
        """Emit ``body``; returns its instruction count per execution (masks not applied)."""
        pad = "    " * depth
        count = 0
        start = len(self.lines)
        last_written: dict[str, set[str]] = {}  # engine -> tensors its previous instruction here wrote
        for stmt in body:
            if isinstance(stmt, Loop):
                self.lines.append(f"{pad}for {stmt.var} in range({stmt.start}, {stmt.stop}, {stmt.step}):")
                count += len(range(stmt.start, stmt.stop, stmt.step)) * self._body(stmt.body, depth + 1)
                last_written.clear()  # across a loop the previous instruction is not known statically
                continue
            engine = engine_of(stmt)
            if engine is None:
                if stmt.name == "assign" and id(stmt) not in self.assigns:
                    raise ValueError(f"{stmt.loc}: assign follows no instruction: the kernel is not lowered")
                continue
            count += 1
            self._instruction(stmt, engine, pad, last_written)
        if len(self.lines) == start:
            self.lines.append(f"{pad}pass")
        return count

    def _instruction(self, op: Op, engine: str, pad: str, last_written: dict) -> None:
        write = self.fused.get(op)
        reads = {a.tensor.name for a in operand_reads(op, write)}
        dependent = bool(reads & last_written.get(engine, set()))
        t = build_template(op, engine, self.target, write, dependent)
        t.index = len(self.templates)
        self.templates.append(t)
        last_written[engine] = {a.tensor.name for a in t.writes}
        for a in t.writes:
            if not a.tensor.type.buffer.on_chip:
                self.written_hbm.add(self.addresses.key_of(a.tensor.name))
        clip = op.mask is not None or (write is not None and write.mask is not None)
        r = "".join(self.addresses.source(a, clip) + ", " for a in t.reads)
        w = "".join(self.addresses.source(a, clip) + ", " for a in t.writes)
        name = f"T{t.index}"
        self.namespace[name] = t
        if op.mask is None:
            self.lines.append(f"{pad}step({name}, ({r}), ({w}))")
            return
        shrink = MaskShrink(op, t, self.target)
        self.namespace[f"M{t.index}"] = shrink
        values = "".join(f"{v}, " for v in shrink.rests)
        self.lines.append(f"{pad}_t = M{t.index}(({values}))")
        self.lines.append(f"{pad}if _t is not None:")
        self.lines.append(f"{pad}    step(_t, ({r}), ({w}))")

    # -- running ---------------------------------------------------------------------------------------------------
    def run(self, step) -> None:
        for inst in self.instances:
            self._unroll(step, *inst)

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
