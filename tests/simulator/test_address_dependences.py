"""Dependences through shared memory: on-chip regions are tracked by address (buffer, partitions, bytes), so tensors
the allocator placed in the same bytes are ordered (WAR/WAW between different tensors), while tensors in disjoint
bytes run in parallel. The same lowered kernel is scheduled under the allocator's placement and under one that
moves a tensor elsewhere."""

import dataclasses

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import Scheduler
from nki_dsl.backends.simulator import _cells as cells
from nki_dsl.backends.simulator.prepared import prepare
from nki_dsl.backends.simulator.stream import Stream
from nki_dsl.passes.allocate import Allocation
from nki_dsl.targets import get_target

T = get_target("trn2")


@nki.jit
def two_phases(x, y):
    """Two independent load -> exp -> store phases; the first phase's tiles are dead when the second starts, so
    the allocator may give the second phase the same bytes."""
    o1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    nl.store(o1, value=nl.exp(a))
    b = nl.load(y)
    nl.store(o2, value=nl.exp(b))
    return o1, o2


def _run(lowered, allocation):
    stream = Stream(lowered, allocation, T)
    sched = Scheduler(T, untracked=stream.untracked(), cells=cells(T))
    stream.run(sched.step)
    s = sched.finish()
    rows = [(s.templates[s.template[k]].op, s.start[k], s.end[k]) for k in range(len(s))]
    return stream, rows


def _phases(lowered):
    """The load of y (second phase) and the exp reading a (first phase)."""
    loads = [op for op, _ in lowered.walk() if getattr(op, "name", "") == "nisa.dma_copy"
             and not op.operands["src"].tensor.type.buffer.on_chip]  # fmt: skip
    load_y = next(op for op in loads if op.operands["src"].tensor.name == "y")
    load_x = next(op for op in loads if op.operands["src"].tensor.name == "x")
    exp_a = next(op for op, _ in lowered.walk() if getattr(op, "name", "") == "nisa.activation"
                 and op.operands["data"].tensor is load_x.operands["dst"].tensor)  # fmt: skip
    return load_y, exp_a


def test_tensors_sharing_bytes_are_ordered_and_disjoint_ones_overlap():
    spec = nki.spec((128, 2048), "float32")
    ir = nki.trace(two_phases, spec, spec).ir
    prepared = prepare(ir, T)
    lowered, alloc = prepared.lowered, prepared.allocation
    load_y, exp_a = _phases(lowered)
    a = alloc.placements[load_y.operands["dst"].tensor.name]
    b = alloc.placements[exp_a.operands["data"].tensor.name]
    # the allocator shares bytes between the phases (lifetimes do not overlap)
    assert (a.buffer, a.byte_offset) == (b.buffer, b.byte_offset)

    _, rows = _run(lowered, alloc)
    when = {id(op): (s, e) for op, s, e in rows}
    # WAR through shared memory: y's load overwrites the bytes the first exp reads, so it waits for it
    assert when[id(load_y)][0] >= when[id(exp_a)][1]

    # Move y's tile to free bytes: the two phases now overlap in time.
    moved = dict(alloc.placements)
    name = load_y.operands["dst"].tensor.name
    moved[name] = dataclasses.replace(moved[name], byte_offset=alloc.peak_bytes("sbuf"))
    _, rows = _run(lowered, Allocation(alloc.target, moved))
    when = {id(op): (s, e) for op, s, e in rows}
    assert when[id(load_y)][0] < when[id(exp_a)][1]
    assert when[id(load_y)][0] == 0.0  # nothing else holds it back: a free DMA queue at the start


def test_on_chip_regions_are_partition_and_byte_ranges_of_the_placement():
    spec = nki.spec((128, 2048), "float32")
    ir = nki.trace(two_phases, spec, spec).ir
    prepared = prepare(ir, T)
    stream = prepared.stream()
    (tmpl, reads, writes), *_ = list(stream.raw())  # the first instruction: the load of x
    assert tmpl.opcode == "nisa.dma_copy"
    p = prepared.allocation.placements[tmpl.writes[0].tensor.name]
    # key 0 is SBUF; the whole [128, 2048] fp32 tile: partitions 0-128, 8 KiB from its byte offset
    assert writes == ((0, (0, 128, p.byte_offset, p.byte_offset + 2048 * 4)),)
    assert reads[0][0] >= 2  # HBM tensors have keys of their own, tracked as boxes in their index space
