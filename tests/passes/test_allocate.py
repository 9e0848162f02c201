"""The allocator: PSUM tiles on bank boundaries within 8 banks, SBUF within the target's capacity, no two
tensors live at the same time share bytes, loop tiles rotate through several buffers, and a kernel that does not
fit is reported with the tensors live at the peak, their sizes and lines."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from benchmarks import reference_cases
from nki_dsl.errors import NkiVerificationError
from nki_dsl.passes import run_pipeline
from nki_dsl.passes.allocate import Allocation, Placement, allocate, live_ranges
from nki_dsl.targets import TARGETS
from tests.passes.lowering import traced

CASES = reference_cases.cases(np.random.default_rng(0))


def _lowered(kernel, *args, target="trn2"):
    ir, _ = traced(kernel, *args)
    return run_pipeline(ir, TARGETS[target])


def _check_invariants(low, alloc: Allocation):
    t = alloc.target
    lives = {lv.tensor.name: lv for lv in live_ranges(low)}
    assert set(alloc.placements) == set(lives)
    for p in alloc.placements.values():
        assert p.partition_start + p.partitions <= t.partitions
        assert p.bytes_per_partition >= lives[p.tensor].tensor.type.bytes_per_partition
        if p.buffer == "psum":
            assert p.byte_offset % t.psum_bank_bytes == 0 and p.bytes_per_partition % t.psum_bank_bytes == 0
    assert alloc.peak_bytes("psum") <= t.psum_banks * t.psum_bank_bytes
    assert alloc.peak_bytes("sbuf") <= t.sbuf_bytes_per_partition
    placed = list(alloc.placements.values())
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            if a.buffer != b.buffer:
                continue
            la, lb = lives[a.tensor].interval(a.buffers), lives[b.tensor].interval(b.buffers)
            if la[1] < lb[0] or lb[1] < la[0]:
                continue  # never live together: may share
            assert a.byte_offset + a.footprint <= b.byte_offset or b.byte_offset + b.footprint <= a.byte_offset, (a, b)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_benchmark_kernels_allocate_within_the_target(case, target):
    _, kernel, _, args = case
    low = _lowered(kernel, *args, target=target)
    alloc = allocate(low, TARGETS[target])
    _check_invariants(low, alloc)


def test_loop_tiles_rotate_and_copies_follow_the_iteration():
    _, kernel, _, args = CASES[1]  # softmax: one affine loop over row tiles
    alloc = allocate(_lowered(kernel, *args), TARGETS["trn2"])
    p = alloc.placements["1"]  # the loaded tile
    assert p.buffers == 3 and p.loop == "i0"
    assert [p.copy_offset(k) for k in range(4)] == [p.byte_offset + (k % 3) * p.bytes_per_partition for k in range(4)]


@nki.jit
def _two_phases(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0:128, :])
    s = nl.exp(a)  # a dies here
    b = nl.load(x[128:256, :])
    nl.store(out, value=nl.add(s, b))
    return out


def test_tensors_whose_lifetimes_do_not_overlap_share_memory():
    low = _lowered(_two_phases, np.zeros((256, 512), np.float32))
    alloc = allocate(low, TARGETS["trn2"])
    _check_invariants(low, alloc)
    offsets = [p.byte_offset for p in alloc.placements.values()]
    assert len(set(offsets)) < len(offsets)  # some tensor reuses a dead one's bytes
    assert alloc.peak_bytes("sbuf") < sum(p.footprint for p in alloc.placements.values())


@nki.jit
def _big(x):
    out = nl.ndarray((128, 17408), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0:128, :])
    b = nl.exp(a)
    c = nl.add(a, b)  # a, b, c: 3 x 68 KiB live together = 204 KiB: fits trn2 (224 KiB), not trn1 (192 KiB)
    nl.store(out, value=nl.add(c, b))
    return out


def test_a_kernel_that_does_not_fit_names_the_live_tensors():
    low = _lowered(_big, np.zeros((128, 17408), np.float32))
    with pytest.raises(NkiVerificationError) as e:
        allocate(low, TARGETS["trn1"])
    text = str(e.value)
    assert "SBUF cannot hold" in text and "196608 a trn1 partition" in text
    assert "%1 69632 B (line" in text and e.value.diagnostics[0].rule == "allocate"


@nki.jit
def _psum_loop(x, y):
    out = nl.ndarray((512, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc += nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.copy(acc))
    return out


def test_psum_loop_tiles_get_banks_and_rotate():
    low = _lowered(_psum_loop, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32))
    alloc = allocate(low, TARGETS["trn2"])
    _check_invariants(low, alloc)
    acc = [p for p in alloc.placements.values() if p.buffer == "psum"]
    assert len(acc) == 1 and acc[0].buffers == 3 and acc[0].bytes_per_partition == 2048


def test_placement_is_a_rectangle_of_partitions_by_bytes():
    p = Placement("t", "sbuf", 0, 128, 1024, 512, 2, "i0")
    assert p.footprint == 1024 and p.copy_offset(3) == 1536
    assert Allocation(TARGETS["trn2"], {"t": p}).peak_bytes("sbuf") == 2048
