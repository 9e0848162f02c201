"""The engine-instruction listing of a lowered, allocated kernel (``nki asm``): one line per instruction with its
engine, opcode and operands (buffer, partition range, byte address and access pattern), loops as loops, and a
header saying where each on-chip tensor lives and how many rotating buffers it got.

An operand reads ``%t@sbuf[0:128]+0x400 ap=[[1,128],[4,512]]``: tensor, buffer, partitions, byte address of its
first element (with ``+k*iN`` terms for loop indices; ``{iN%3}`` marks which rotating copy an iteration uses),
and an NKI-style access pattern ``[[step, count], ...]``: the partition step, then each free axis's stride in
bytes. HBM operands show their byte offset in the (linear) tensor.
"""

from __future__ import annotations

import math

from nki_dsl import dtypes
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op
from nki_dsl.passes.allocate import Allocation
from nki_dsl.passes.engines import engine_of, fused_writes


def listing(kernel: Kernel, alloc: Allocation) -> str:
    lines = [f"; kernel {kernel.name} on {alloc.target.name}: SBUF peak {alloc.peak_bytes('sbuf')} B/partition, "
             f"PSUM peak {alloc.peak_bytes('psum')} B/partition"]  # fmt: skip
    for p in sorted(alloc.placements.values(), key=lambda p: (p.buffer, p.byte_offset)):
        lines.append(f"; %{p.tensor}: {p.buffer}[{p.partition_start}:{p.partition_start + p.partitions}] "
                     f"+{p.byte_offset:#x} {p.bytes_per_partition} B x {p.buffers} buffer"
                     f"{'s' if p.buffers > 1 else ''}")  # fmt: skip
    _Printer(kernel, alloc, lines).body(kernel.body, 0, {})
    return "\n".join(lines) + "\n"


class _Printer:
    def __init__(self, kernel: Kernel, alloc: Allocation, lines: list[str]):
        self.alloc = alloc
        self.lines = lines
        self.fused = fused_writes(kernel)

    def body(self, body, depth: int, loop_of: dict) -> None:
        pad = "  " * depth
        for stmt in body:
            if isinstance(stmt, Loop):
                reads = f" reads %{stmt.reads.tensor.name}" if stmt.reads is not None else ""  # ir/runtime_loops.py
                self.lines.append(f"{pad}{stmt.kind} {stmt.var} in range({stmt.start}, {stmt.stop}, {stmt.step})"
                                  f"{reads} {{")
                self.body(stmt.body, depth + 1, loop_of)
                self.lines.append(f"{pad}}}")
                continue
            engine = engine_of(stmt)
            if engine is None:
                continue  # alloc, HBM views, assign (shown as its producer's dst), and non-instructions
            self.lines.append(f"{pad}{engine:<7}{self.instruction(stmt)}")

    def instruction(self, op: Op) -> str:
        parts = []
        write = self.fused.get(op)
        if write is not None:
            acc = write.attrs.get("accumulate", "none")
            parts.append(f"dst{'+=' if acc == 'add' else '=' if acc == 'none' else f'<{acc}>='}"
                         f"{self.operand(write.operands['dst'])}")  # fmt: skip
            if write.attrs.get("zero_first"):  # the first iteration of that loop overwrites (starts the group)
                parts.append(f"zero_first={write.attrs['zero_first']}")
        elif op.result is not None:
            parts.append(f"dst={self.operand(op.result.full_access())}")
        for name, v in op.operands.items():
            parts.append(f"{name}={v.value!r}" if isinstance(v, Imm) else f"{name}={self.operand(v)}")
        attrs = [f"{k}={v}" for k, v in op.attrs.items() if k != "engine" and v not in ("none", "idle", (), False)]
        mask = f" mask[{op.mask}]" if op.mask is not None else ""
        return f"{op.name.removeprefix('nisa.'):<22}" + " ".join(parts + attrs) + mask + f"  ; line {op.loc.line}"

    def operand(self, a: Access) -> str:
        ty = a.tensor.type
        item = dtypes.get(ty.dtype).itemsize
        par = ty.par_axis if ty.buffer.on_chip else None  # HBM is linear: every dimension has a byte stride
        placed = self.alloc.placements.get(a.tensor.name)
        shared = placed is not None and placed.shared_blocks  # blocks share one block's space: no block stride
        strides = _row_major(ty.shape, par, skip=par if shared else 0)
        offset = sum((_at_origin(e) * (s * item) for e, s in zip(a.index, strides)), Affine())
        ap = []
        for k in range(len(a.shape)):
            d = f"d{k}"
            step = sum(e.coef(d) * s * item for e, s in zip(a.index, strides))
            if par is not None and k == 0:  # the partition axis: its step is in partitions
                step = a.index[par].coef(d)
            ap.append(f"[{step},{a.shape[k]}]")
        dims = f"{dtypes.get(ty.dtype).short}[{'x'.join(map(str, a.shape))}]"
        if not ty.buffer.on_chip:
            return f"%{a.tensor.name}@{ty.buffer.value}+{_affine(offset)} {dims} ap=[{','.join(ap)}]"
        p = self.alloc.placements.get(a.tensor.name)
        if p is None:
            return f"%{a.tensor.name}@{ty.buffer.value}(unplaced) {dims}"
        first = _at_origin(a.index[ty.par_axis])
        part = f"{p.partition_start}+{_affine(first)}" if first.terms or first.const else str(p.partition_start)
        turns = "+".join(v if w == 1 else f"{w}*{v}" for v, w in p.turns)
        turns = turns if len(p.turns) == 1 else f"({turns})"  # the flattened iteration of its loops
        rotation = f"+{p.bytes_per_partition}*{{{turns}%{p.buffers}}}" if p.buffers > 1 else ""
        base = f"{p.byte_offset:#x}{rotation}" + ("" if _affine(offset) == "0" else f"+{_affine(offset)}")
        return f"%{a.tensor.name}@{p.buffer}[{part}:+{a.shape[0]}]+{base} {dims} ap=[{','.join(ap)}]"


def _at_origin(e: Affine) -> Affine:
    """``e`` at the access's first element: its axis variables d<k> at 0 (loop indices stay symbolic)."""
    return e.substitute({v: 0 for v in e.vars() if v.startswith("d")})


def _row_major(shape, par_axis: int | None, skip: int = 0) -> list[int]:
    """Element stride of each dimension: HBM tensors are row-major; on-chip ones row-major over their free
    dimensions within a partition (the partition dimension has no byte stride). The first ``skip`` dimensions
    (a block-local tensor's blocks) have none either."""
    free = [k for k in range(skip, len(shape)) if k != par_axis]
    strides = [0] * len(shape)
    for k in free:
        strides[k] = math.prod(shape[j] for j in free if j > k)
    return strides


def _affine(e: Affine) -> str:
    return str(e) if (e.terms or e.const) else "0"
