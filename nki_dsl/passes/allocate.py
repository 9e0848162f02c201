"""Placement of every on-chip tensor in SBUF or PSUM for a target: what the ``allocate`` step produces and the
simulator reads to know which buffer region an instruction touches (so it can find RAW/WAR/WAW dependences)."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from nki_dsl.errors import Diagnostic, NkiVerificationError
from nki_dsl.ir.nodes import Access, Loop, Op
from nki_dsl.passes.engines import fused_writes
from nki_dsl.targets import Target
from nki_dsl.verify.placements import banks_of, rects, start_step  # noqa: F401 - start_step: current API's checks
from nki_dsl.verify.program import Program
from nki_dsl.verify.psum_buffers import block_local, block_range


@dataclass(frozen=True)
class Placement:
    """Where one on-chip tensor lives. SBUF/PSUM are 2-D (partitions x bytes), so a tensor is a rectangle: partitions
    ``[partition_start, partition_start + partitions)`` x bytes ``[byte_offset, byte_offset + bytes_per_partition)``
    of every partition (reference/nki.md §1.1). A tensor allocated in a loop body gets ``buffers`` rotating copies,
    copy ``k`` at ``byte_offset + k * bytes_per_partition``; iteration ``i`` uses copy ``i % buffers``, so a DMA
    filling the next copy can overlap compute on the current one. ``i`` is the flattened iteration of the loops in
    ``rotation`` (row-major, the innermost fastest: ``sum(weight * (value - start) // step)``), the enclosing loops
    whose iterations may overlap (``_rotation_loops``), so a loop that runs once does not stop the copies turning
    over the loops around it."""

    tensor: str
    buffer: str  # "sbuf" | "psum"
    partition_start: int
    partitions: int
    byte_offset: int
    bytes_per_partition: int
    buffers: int = 1
    loop: str | None = None  # the outermost loop of the rotation: the copies are in use over its whole body
    # Block-local PSUM tensor (verify/psum_buffers.py): its blocks share one block's space, so the block index
    # does not move the address; the rotating copy (by ``loop``) does.
    shared_blocks: bool = False
    # A directly allocated tensor with block dimensions: (start partition, byte offset) of each block, row-major
    # over the block dimensions (language/direct_allocation.py). The fields above are then the bounding box of all
    # blocks; empty for every other tensor (blocks lie consecutively from ``byte_offset``).
    blocks: tuple[tuple[int, int], ...] = ()
    # (loop variable, weight) of every loop the copy turns with, outermost first; empty: ``loop`` alone, weight 1
    rotation: tuple[tuple[str, int], ...] = ()

    @property
    def turns(self) -> tuple[tuple[str, int], ...]:
        """(loop variable, weight in the flattened iteration) of the loops that pick the copy."""
        return self.rotation or (((self.loop, 1),) if self.loop is not None else ())

    @property
    def footprint(self) -> int:
        """Bytes per partition taken by all rotating copies."""
        return self.bytes_per_partition * self.buffers

    def copy_offset(self, iteration: int) -> int:
        """Byte offset of the copy iteration ``iteration`` of the enclosing loop uses."""
        return self.byte_offset + (iteration % self.buffers) * self.bytes_per_partition


@dataclass
class Allocation:
    """The placements of one kernel for one target, keyed by tensor name."""

    target: Target
    placements: dict[str, Placement] = field(default_factory=dict)

    def peak_bytes(self, buffer: str) -> int:
        """Highest byte address (per partition) any tensor in ``buffer`` reaches."""
        return max((p.byte_offset + p.footprint for p in self.placements.values() if p.buffer == buffer), default=0)


# -- the allocator ------------------------------------------------------------------------------------------------

MAX_BUFFERS = 3  # rotating copies tried first for a tile made in a loop body (then 2, then 1), as NKI's allocator


@dataclass
class _Live:
    tensor: object  # nki_dsl.ir.nodes.Tensor
    op: object  # the op that defined it (for error locations)
    start: int
    end: int
    # the loops the copies may turn with, innermost first (``_rotation_loops``): (variable, start, end, trip count)
    chain: tuple[tuple[str, int, int, int], ...]
    block_bytes: int | None = None  # a block-local tensor: the bytes per partition of one block (all it takes)

    def trips(self, depth: int) -> int:
        """The most copies rotating over the innermost ``depth`` loops of the chain may take: the trip count of the
        innermost of them that iterates (1 if none does). The copy count stays bounded as when only the innermost
        loop rotated: the loops around it carry the rotation on across its ends (a loop that runs once no longer
        stops it) rather than adding copies."""
        return next((c[3] for c in self.chain[:depth] if c[3] > 1), 1)

    def turning(self, buffers: int, depth: int | None = None) -> list[tuple[str, int, int, int]]:
        """(variable, weight, start, end) of the loops among the innermost ``depth`` of the chain (default all)
        that move the copy of ``buffers``, innermost first: a loop's weight is the iterations of the loops inside
        it; one that runs once, or whose weight is a multiple of ``buffers``, never moves it."""
        out, weight = [], 1
        for var, lo, hi, trip in self.chain[:len(self.chain) if depth is None else depth]:
            if buffers > 1 and trip > 1 and weight % buffers:
                out.append((var, weight, lo, hi))
            weight *= trip
        return out

    def interval(self, buffers: int, depth: int | None = None) -> tuple[int, int]:
        # Rotating copies are in use across iterations: the tensor holds its space for the whole body of the
        # outermost loop that moves its copy (its copies of every iteration in flight are in use).
        turning = self.turning(buffers, depth)
        if turning:
            return min(self.start, turning[-1][2]), max(self.end, turning[-1][3])
        return self.start, self.end


def allocate(kernel, t: Target, fit: Callable[[str], OneCopyFit] | None = None) -> Allocation:
    """Place every materialised on-chip tensor of lowered ``kernel``. Raises ``NkiVerificationError`` (rule
    ``allocate``) naming the tensors live at the peak when SBUF or PSUM cannot hold them, or the tensor that found
    no hole. Each fits exactly when ``fit_one_copy`` says so (the verifier's ``sbuf-capacity`` and ``psum-banks``
    rules ask it too, ``one_copy_fit``); rotating copies are then added where they still fit.

    ``fit(buffer)``, when given, is ``one_copy_fit`` of this very kernel object's live ranges on ``t``, already
    computed: the verifier's placing rules asked it about the lowering the compiler now allocates
    (``passes/verifier.AllocatorView``), so the walk and the one-copy fits are not done twice. Both are
    deterministic functions of the kernel, which is not changed once verified, so the placements are the same."""
    if fit is None:
        lives = live_ranges(kernel)

        def fit(buffer: str) -> OneCopyFit:
            return one_copy_fit(lives, t, buffer)

    out = Allocation(t)
    for buffer in ("sbuf", "psum"):
        one = fit(buffer)
        group, capacity, unit, fixed = one.group, one.capacity, one.unit, one.fixed
        # Rotating copies per tensor: MAX_BUFFERS each first; while that does not fit, take one copy from the
        # tensor with the most copies, the largest among those (so every tensor keeps double buffering before any
        # loses it). One large tensor that cannot be tripled then no longer costs every small tile its double
        # buffering (which would stall the engine consuming it at every iteration).
        copies = {lv.tensor.name: 1 if _address(lv) else MAX_BUFFERS for lv in group}
        # Each tensor's copies first turn over its whole chain of loops (``_rotation_loops``). Rotating over an
        # outer loop holds the copies over that loop's whole body, which may not fit (ViT attention's six PSUM
        # tiles per head cannot each hold two banks over a head's body: 8 banks, reference/nki.md §1.1). The
        # fallback: the tensor chosen to shrink (as below) gives up its outermost loop when the loops inside still
        # turn as many copies (so it keeps them and holds them over a shorter span), else a copy. At the last a
        # tensor keeps one copy, as before; the verifier's sbuf-capacity and psum-banks rules judge the one-copy
        # fit, which rotation never changes, so the two still agree.
        depth = {lv.tensor.name: len(lv.chain) for lv in group}

        def buffers(lv: _Live, copies=copies, depth=depth) -> int:
            return min(copies[lv.tensor.name], lv.trips(depth[lv.tensor.name]))

        # the one-copy placement decides whether the kernel fits
        if one.placed is None:
            raise _does_not_fit(group, buffer, capacity, unit, t.name, one.misfit)
        while (placed := _place(group, buffer, capacity, unit, copies, fixed, depth=depth)) is None:
            shrinkable = [lv for lv in group if buffers(lv) > 1]
            if not shrinkable:
                placed = one.placed  # first fit in program order left no hole; largest first did
                break
            big = max(shrinkable, key=lambda lv: (buffers(lv), _size(lv, unit), -lv.start))
            name = big.tensor.name
            if depth[name] > 1 and big.trips(depth[name] - 1) >= buffers(big):
                depth[name] -= 1  # the loops inside still turn all its copies: give up the outer loop's span
            else:
                copies[name] -= 1
        out.placements.update(placed)
    return out


def _size(lv: _Live, unit: int) -> int:
    n = lv.tensor.type.bytes_per_partition if lv.block_bytes is None else lv.block_bytes
    return -(-n // unit) * unit  # PSUM tiles take whole 2 KiB banks, so each starts on a bank boundary


def _in_program_order(lv: _Live, unit: int):
    return lv.start, -lv.tensor.type.bytes_per_partition


def _largest_first(lv: _Live, unit: int):
    return -_size(lv, unit), lv.start


@dataclass(frozen=True)
class Misfit:
    """First fit found no hole for ``live`` (``size`` bytes per partition, aligned): ``others`` are the tensors
    already placed whose live ranges overlap its range, with their byte ranges ``(lo, hi)``."""

    live: _Live
    size: int
    others: tuple[tuple[_Live, int, int], ...]


def _place(group, buffer, capacity, unit, copies: dict[str, int], fixed=(), order=_in_program_order,
           misfits: list | None = None,
           depth: dict[str, int] | None = None) -> dict[str, Placement] | None:  # fmt: skip
    """``copies``: rotating copies asked for each tensor (by name); ``depth``: how many loops of its chain (from the
    innermost) they turn over (default: all). First fit in address order over tensors sorted by ``order`` (by
    start: program order); tensors whose intervals do not overlap share. ``fixed``: placements the kernel chose,
    taken as they are (the others fit around them, clear of the spans they hold). On failure, ``misfits`` (when
    given) receives the ``Misfit``."""
    placed: list[tuple[_Live, Placement]] = [(lv, p) for lv, p, _ in fixed]
    out = {p.tensor: p for _, p, _ in fixed}
    held = {p.tensor: spans for _, p, spans in fixed}
    intervals = {p.tensor: lv.interval(1) for lv, p, _ in fixed}
    for lv in sorted(group, key=lambda lv: order(lv, unit)):
        if lv.tensor.name in out:
            continue
        levels = len(lv.chain) if depth is None else depth[lv.tensor.name]
        buffers = min(copies[lv.tensor.name], lv.trips(levels)) if lv.chain else 1
        size = _size(lv, unit)
        lo, hi = intervals[lv.tensor.name] = lv.interval(buffers, levels)
        overlapping = [(o, p) for o, p in placed
                       if not (intervals[p.tensor][1] < lo or hi < intervals[p.tensor][0])]  # fmt: skip
        busy = sorted(span for _, p in overlapping
                      for span in held.get(p.tensor, ((p.byte_offset, p.byte_offset + p.footprint),)))  # fmt: skip
        offset = 0
        for b_lo, b_hi in busy:
            if offset + size * buffers <= b_lo:
                break
            offset = max(offset, b_hi)
        if offset + size * buffers > capacity:
            if misfits is not None:
                misfits.append(Misfit(lv, size * buffers, tuple((o, p.byte_offset, p.byte_offset + p.footprint)
                                                                for o, p in overlapping)))  # fmt: skip
            return None
        ty = lv.tensor.type
        rotation = tuple((var, weight) for var, weight, _, _ in reversed(lv.turning(buffers, levels)))
        p = Placement(lv.tensor.name, buffer, 0, ty.partitions, offset, size, buffers,
                      rotation[0][0] if rotation else None, lv.block_bytes is not None, rotation=rotation)
        placed.append((lv, p))
        out[p.tensor] = p
    return out


# Placed tensors examined by one ``fit_one_copy`` order at most (~5 s of Python): IR with thousands of SBUF tensors
# live at once (20,000 ops fit the IR budget) is refused as too costly to place, by the allocator and the verifier
# alike. Real kernels stay far below (ViT attention at sequence 16384: under 100,000).
MAX_FIT_WORK = 6_000_000


def fit_one_copy(group, capacity: int, unit: int, fixed=(),
                 buffer: str = "sbuf") -> tuple[dict[str, Placement] | None, Misfit | None]:  # fmt: skip
    """Whether the ``buffer`` tensors ``group`` fit with one copy each (no rotation), and a placement if they do: first
    fit in program order (the order the rotating placements use), then, when that leaves some tensor no hole
    although its bytes are free in total (fragmentation), first fit largest first. The allocator refuses exactly
    when this does, and the verifier's ``sbuf-capacity`` and ``psum-banks`` rules run it on the lowered kernel
    (``one_copy_fit``), so the two agree on every kernel. In PSUM every size is whole banks and a tensor the kernel
    placed holds every bank it touches (as ``verify/psum_buffers`` counts them), so each tensor starts on a bank. It
    reads program positions only, not trip counts, so a shape family's instances all get the same answer.
    ``(None, misfit)`` names the tensor program order found no hole for (its ``size`` is -1 when the placement gave
    up past ``MAX_FIT_WORK``)."""
    first = None
    for order in (_in_program_order, _largest_first):
        placed, misfit = _fit(group, capacity, unit, fixed, order, buffer)
        if placed is not None:
            return placed, None
        first = first or misfit
        if misfit.size < 0:
            break
    return None, first


def _fit(group, capacity, unit, fixed, order, buffer):
    """First fit of ``group`` in ``order``, one copy each, around the ``fixed`` placements. In program order only
    the tensors still live are looked at (kept sorted by address), so it costs the number of tensors times those
    live at once."""
    out = {p.tensor: p for _, p, _ in fixed}
    fixed_spans = [(o, lo, hi) for o, _, spans in fixed for lo, hi in spans]
    items = sorted((lv for lv in group if lv.tensor.name not in out), key=lambda lv: order(lv, unit))
    streaming = order is _in_program_order  # starts ascending: a tensor ended before this start never meets it
    placed: list[tuple[_Live, int, int]] = []  # (live range, byte lo, byte hi), by address when streaming
    ends: list[tuple[int, int]] = []  # (end, id) of the placed tensors, when streaming: the next to expire first
    work = 0
    for lv in items:
        if streaming:
            if ends and ends[0][0] < lv.start:
                while ends and ends[0][0] < lv.start:
                    heapq.heappop(ends)
                placed = [x for x in placed if x[0].end >= lv.start]
            near = placed
        else:
            near = [x for x in placed if not (x[0].end < lv.start or lv.end < x[0].start)]
            near.sort(key=lambda x: x[1])
        meets = near + [x for x in fixed_spans if not (x[0].end < lv.start or lv.end < x[0].start)]
        if fixed_spans:
            meets.sort(key=lambda x: x[1])
        work += len(placed) + len(fixed_spans)
        size = _size(lv, unit)
        if work > MAX_FIT_WORK:
            return None, Misfit(lv, -1, ())
        offset = 0
        for _, b_lo, b_hi in meets:
            if offset + size <= b_lo:
                break
            offset = max(offset, b_hi)
        if offset + size > capacity:
            return None, Misfit(lv, size, tuple(meets))
        entry = (lv, offset, offset + size)
        if streaming:
            bisect.insort(placed, entry, key=lambda x: x[1])
            heapq.heappush(ends, (lv.end, id(lv)))
        else:
            placed.append(entry)
        ty = lv.tensor.type
        out[lv.tensor.name] = Placement(lv.tensor.name, buffer, 0, ty.partitions, offset, size, 1, None,
                                        lv.block_bytes is not None)  # fmt: skip
    return out, None


def memory(t: Target, buffer: str) -> tuple[int, int]:
    """(bytes per partition, the unit every size rounds up to) of ``buffer`` on ``t``: SBUF tensors start on the
    free-dim alignment, PSUM tiles take whole banks (reference/nki.md §1.1-§1.2)."""
    if buffer == "sbuf":
        return t.sbuf_bytes_per_partition, t.sbuf_min_align
    return t.psum_bytes_per_partition, t.psum_bank_bytes


@dataclass(frozen=True)
class OneCopyFit:
    """``fit_one_copy`` of one memory's tensors: what the placing rules judge and the allocator starts from."""

    group: list  # the ``_Live`` ranges of the memory's tensors
    capacity: int  # bytes per partition
    unit: int  # the size every tensor rounds up to (``memory``)
    fixed: list  # the placements the kernel chose (``_fixed``)
    placed: dict | None  # one copy of each placed, or None when they do not fit
    misfit: Misfit | None  # why not (``fit_one_copy``)

    def size(self, lv: _Live) -> int:
        """The aligned bytes per partition ``lv`` takes."""
        return _size(lv, self.unit)


def one_copy_fit(lives: list[_Live], t: Target, buffer: str) -> OneCopyFit:
    """``fit_one_copy`` for the ``buffer`` tensors among ``lives`` (``live_ranges`` of a lowered kernel) on ``t``."""
    capacity, unit = memory(t, buffer)
    group = [lv for lv in lives if lv.tensor.type.buffer.value == buffer]
    fixed = _fixed(group, buffer, capacity, unit, t)
    placed, misfit = fit_one_copy(group, capacity, unit, fixed, buffer)
    return OneCopyFit(group, capacity, unit, fixed, placed, misfit)


def _address(lv: _Live) -> tuple[int, ...]:
    return tuple(lv.op.attrs.get("address", ())) if lv.op.name == "alloc" else ()


def _fixed(group, buffer, capacity, unit, target) -> list[tuple[_Live, Placement, tuple[tuple[int, int], ...]]]:
    """The placements kernels chose (direct allocation, the current API's ``address=``), as they are: the
    verifier's ``direct-allocation`` rule has checked them against the target (inside the memory, aligned, no two
    live at once overlapping) on this lowered IR before the allocator runs. Each comes with the byte spans no
    other tensor live with it may take: in SBUF its bytes; in PSUM every bank it touches (a tile at byte 1024 of
    bank 0 holds bank 0; the allocator's tiles start on banks, ``psum-banks`` counts the bank once)."""
    out = []
    for lv in group:
        rs = rects(lv.op) if _address(lv) else None
        if not rs:
            continue
        p_lo, p_hi = min(r.p_lo for r in rs), max(r.p_hi for r in rs)
        b_lo, b_hi = min(r.b_lo for r in rs), max(r.b_hi for r in rs)
        # (SBUF: its bytes to the alignment; PSUM: its bytes, which rounded to a bank from inside one would reach
        # into the next bank, a false overlap for the simulator's dependences; it holds whole banks, ``spans``)
        size = -(-(b_hi - b_lo) // unit) * unit if len(rs) == 1 and buffer == "sbuf" else b_hi - b_lo
        blocks = tuple((r.p_lo, r.b_lo) for r in rs) if lv.tensor.type.block_shape else ()
        p = Placement(lv.tensor.name, buffer, p_lo, p_hi - p_lo, b_lo, size, 1, None, blocks=blocks)
        if buffer == "psum":
            spans = tuple((b * unit, (b + 1) * unit) for b in sorted(banks_of(lv.op, unit)))
        else:
            spans = ((p.byte_offset, p.byte_offset + p.footprint),)
        out.append((lv, p, spans))
    return out


def _does_not_fit(group, buffer, capacity, unit, target, misfit: Misfit | None = None):
    """The tensors live at the peak, or (``misfit``, when the peak fits) the tensor that found no hole."""
    points = sorted({lv.start for lv in group})
    at = max(points, key=lambda x: sum(_size(lv, unit) for lv in group if lv.start <= x <= lv.end))
    live = sorted((lv for lv in group if lv.start <= at <= lv.end), key=lambda lv: -_size(lv, unit))
    total = sum(_size(lv, unit) for lv in live)
    if misfit is not None and misfit.size < 0:
        op = misfit.live.op
        msg = (f"{buffer.upper()}: {len(group)} tensors, so many live at once that placing them passed "
               f"MAX_FIT_WORK ({MAX_FIT_WORK} tensors examined) at %{misfit.live.tensor.name}")  # fmt: skip
        return NkiVerificationError([Diagnostic(op.loc, op.name, "allocate", msg)])
    if misfit is not None and total <= capacity:
        op, others = misfit.live.op, sorted(misfit.others, key=lambda o: o[1])
        items = ", ".join(f"%{o.tensor.name} {hi - lo} B at {lo} (line {o.op.loc.line})" for o, lo, hi in others)
        msg = (f"{buffer.upper()} has no hole for %{misfit.live.tensor.name} ({misfit.size} bytes per partition): "
               f"the {sum(hi - lo for _, lo, hi in others)} bytes live with it fit a {target} partition's "
               f"{capacity}, but not with a gap this large, placed in program order or largest first; live with it: "
               f"{items}")  # fmt: skip
        return NkiVerificationError([Diagnostic(op.loc, op.name, "allocate", msg)])
    items = ", ".join(f"%{lv.tensor.name} {_size(lv, unit)} B (line {lv.op.loc.line})" for lv in live)
    msg = (f"{buffer.upper()} cannot hold the tensors live here: {total} bytes per partition, more than the "
           f"{capacity} a {target} partition has; live: {items}")
    op = max(live, key=lambda lv: lv.start).op
    return NkiVerificationError([Diagnostic(op.loc, op.name, "allocate", msg)])


def live_ranges(kernel) -> list[_Live]:
    """Program-order live ranges of the materialised on-chip tensors. A tensor used in a loop it was not defined
    in stays live to that loop's end (every iteration reads it); results an ``assign`` consumes are written
    straight into the assign's destination (``engines.fused_writes``) and take no space."""
    fused = {producer.result.name for producer in fused_writes(kernel)}
    spans: dict[int, tuple[int, int, int]] = {}
    order: list[tuple[object, tuple]] = []

    registers: list[tuple[str, int, tuple]] = []  # runtime loops' registers (ir/runtime_loops.py): read by the loop

    def walk(body, loops):
        for stmt in body:
            if isinstance(stmt, Loop):
                start = len(order)
                walk(stmt.body, loops + (stmt,))
                spans[id(stmt)] = (start, max(start, len(order) - 1), stmt.trip_count)
                if stmt.reads is not None:  # live through the loop that reads it (a while loop: every iteration)
                    registers.append((stmt.reads.tensor.name, spans[id(stmt)][1], loops))
            else:
                order.append((stmt, loops))

    walk(kernel.body, ())
    lives: dict[str, _Live] = {}
    local = _block_local(kernel, spans, fused)
    def_loops: dict[str, tuple] = {}
    for pos, (op, loops) in enumerate(order):
        assert isinstance(op, Op)
        r = op.result
        if r is not None and r.type.buffer.on_chip and r.name not in fused:
            lives[r.name] = _Live(r, op, pos, pos, _rotation_loops(loops, spans))
            def_loops[r.name] = loops
        for v in op.operands.values():
            if isinstance(v, Access) and v.tensor.name in lives:
                lv, end = lives[v.tensor.name], pos
                for lp in loops:
                    if lp not in def_loops[v.tensor.name]:
                        end = max(end, spans[id(lp)][1])
                lv.end = max(lv.end, end)
    for name, end, loops in registers:
        lv = lives.get(name)
        if lv is not None:
            for lp in loops:
                if lp not in def_loops[name]:
                    end = max(end, spans[id(lp)][1])
            lv.end = max(lv.end, end)
    for name, lv in local.items():
        lives[name] = lv
    return list(lives.values())


def _block_local(kernel, spans, fused) -> dict[str, _Live]:
    """Block-local PSUM tensors (the verifier's ``psum_buffers``, so the two agree on what fits): one block's
    banks, live over one iteration of the loop that picks the block, rotating with that loop."""
    prog = Program(kernel)
    out = {}
    for t, site in prog.defs.items():
        if t.type.buffer.value != "psum" or t.name in fused or site.op.attrs.get("address"):
            continue  # (a tensor the kernel placed keeps all its blocks where it put them, as psum_buffers counts)
        local = block_local(prog, t, site)
        if local is None:
            continue
        start, end = block_range(prog, t, local.loop)
        rotate = local.rotate  # (its copies turn with the loop picking the block only, as psum_buffers counts them)
        chain = ((rotate.var, *spans[id(rotate)]),) if rotate is not None else ()
        one = t.type.bytes_per_partition // math.prod(t.type.block_shape)
        out[t.name] = _Live(t, site.op, start, end, chain, one)
    return out


def _rotation_loops(loops: tuple[Loop, ...], spans) -> tuple[tuple[str, int, int, int], ...]:
    """The loops a tensor made in the body of ``loops[-1]`` rotates its copies over, innermost first, as
    ``(variable, start, end, trip count)``: its own loop and every enclosing one. On hardware a tile allocated in a
    loop body gets its buffers rotated over the iterations that can overlap: an ``affine_range`` loop's iterations
    may be "parallelized/pipelined on different compute engines" (reference/nki.md §1.4), the outer loop's as much
    as the inner one's, and the direct-allocation API's ``mod_alloc`` picks the copy by the row-major linear index
    of the block indices modulo the copy count (reference/nki.md §2.7, legacy items, "Direct allocation"), which is
    this flattened iteration. A ``sequential_range`` loop is in the chain too: its loop-carried state lives in
    tensors made outside it (DESIGN.md, loop semantics), which are not rotated and keep ordering its iterations
    through their single copy; a tensor made in its body is written afresh by each iteration, carries nothing
    from one to the next, and may overlap the next iteration's work like an affine loop's (this allocator always
    rotated a sequential innermost loop's tiles). A runtime loop (ir/runtime_loops.py) runs an unknown number of
    times, so the flattened iteration cannot count past it: it ends the chain (kept only as the innermost loop,
    as before). A loop that runs once adds no copy but widens the span the copies hold."""
    chain = []
    for lp in reversed(loops):
        if lp.runtime and chain:
            break
        chain.append((lp.var, *spans[id(lp)]))
        if lp.runtime:
            break
    return tuple(chain)
