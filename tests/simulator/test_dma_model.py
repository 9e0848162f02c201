"""The DMA model's mechanisms (reference/nki.md §3.4) against figures derived from the target constants: one
descriptor per contiguous run (so element-wise strided access pays one per element), rows dealt 8 to an engine,
queues assigned in turn and in order, the hardware DGE's two shared instances, and the fixed cost of a transfer
occupying the DMA engines one transfer at a time, hidden only behind the streaming of the transfer before it
(docs/dma_model.md)."""

import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.targets import get_target


def _dma(prof):
    s = prof.schedule
    return [k for k in range(len(s)) if s.templates[s.template[k]].engine == "dma"]


@nki.jit
def strided_load(x, stride=2):
    out = nl.ndarray((x.shape[0], x.shape[1] // stride), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(x.shape[0])[:, None], nl.arange(x.shape[1] // stride)[None, :]
    nl.store(out, value=nl.load(x[i_p, stride * i_f]))
    return out


def test_element_wise_strided_access_is_one_descriptor_per_element():
    t = get_target("trn2")
    prof = nki.benchmark(strided_load, nki.spec((128, 512), "float32"), target="trn2")
    s = prof.schedule
    load, store = (s.templates[s.template[k]] for k in _dma(prof))
    bw, desc = t.dma_engine_bytes_per_ns, t.dma_overhead_bound_bytes / t.dma_engine_bytes_per_ns
    semaphore = desc + 4 / bw
    assert load.dma_descriptors == 128 * 256  # every other fp32 element: no two are contiguous in HBM
    assert load.payload_ns == pytest.approx(8 * 256 * (desc + 4 / bw) + semaphore)
    assert store.dma_descriptors == 128  # the result rows are contiguous: one descriptor per partition
    assert store.payload_ns == pytest.approx(8 * (desc + 1024 / bw) + semaphore)
    assert load.payload_ns > 40 * store.payload_ns  # same bytes: the strided load is "severely overhead-bound"


@nki.jit
def few_partitions(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out


@pytest.mark.parametrize("rows", [8, 16, 128])
def test_rows_are_dealt_eight_to_an_engine(rows):
    t = get_target("trn1")
    prof = nki.benchmark(few_partitions, nki.spec((rows, 1024), "float32"), target="trn1")
    s = prof.schedule
    load = s.templates[s.template[_dma(prof)[0]]]
    assert load.dma_engines == rows // 8
    bw, desc = t.dma_engine_bytes_per_ns, t.dma_overhead_bound_bytes / t.dma_engine_bytes_per_ns
    # the busiest engine streams its 8 rows whatever the rest do: fewer partitions, proportionally less bandwidth
    assert load.payload_ns == pytest.approx(8 * (desc + 4096 / bw) + desc + 4 / bw)


@nki.jit
def many_loads(x, n=20, dge=False):
    """``n`` independent tiny loads into separate slices of one tile."""
    out = nl.ndarray((128, 4 * n), dtype=x.dtype, buffer=nl.shared_hbm)
    mode = nisa.dge_mode.hwdge if dge else nisa.dge_mode.unknown
    t = nl.ndarray((128, 4 * n), dtype=x.dtype, buffer=nl.sbuf)
    for k in range(n):  # unrolled
        nisa.dma_copy(dst=t[:, 4 * k:4 * k + 4], src=x[:, 4 * k:4 * k + 4], dge_mode=mode)
    nl.store(out, value=nl.copy(t))
    return out


def test_queues_are_dealt_in_turn_and_work_in_order():
    t = get_target("trn2")
    prof = nki.benchmark(many_loads, nki.spec((128, 80), "float32"), target="trn2")
    s = prof.schedule
    loads = _dma(prof)[:20]
    assert [s.units[s.unit[k]] for k in loads] == [f"dma{q % 16}" for q in range(20)]
    # the 17th transfer shares queue 0 with the first and starts when the first ends (in order, one at a time)
    assert s.start[loads[16]] == pytest.approx(s.end[loads[0]])
    assert all(s.start[k] == 0.0 for k in loads[:16])  # queued at once (their fixed costs then take turns)
    assert s.end[loads[0]] >= t.dma_fixed_ns


def test_hardware_dge_instructions_share_two_instances():
    t = get_target("trn2")
    prof = nki.benchmark(many_loads, nki.spec((128, 16), "float32"), n=4, dge=True, target="trn2")
    s = prof.schedule
    loads = _dma(prof)[:4]
    # §3.4: each DGE instruction takes ~600 ns on one of two DGE instances: two start at once, two wait for them
    assert sorted(s.start[k] for k in loads) == pytest.approx([0, 0, t.dge_fixed_ns, t.dge_fixed_ns])
    assert t.dge_instances == 2


@nki.jit
def hbm_to_hbm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_an_hbm_to_hbm_copy_of_many_rows_spreads_them_over_the_sixteen_engines():
    t = get_target("trn2")
    prof = nki.benchmark(hbm_to_hbm, nki.spec((1024, 512), "float32"), target="trn2")
    s = prof.schedule
    copy = s.templates[s.template[_dma(prof)[0]]]
    bw, desc = t.dma_engine_bytes_per_ns, t.dma_overhead_bound_bytes / t.dma_engine_bytes_per_ns
    assert copy.dma_engines == 16
    assert copy.payload_ns == pytest.approx(1024 // 16 * (desc + 2048 / bw) + desc + 4 / bw)  # 64 rows each


def _ends(prof):
    s = prof.schedule
    return sorted(s.end[k] for k in _dma(prof)[:-1])  # the loads (the last transfer is the store)


def test_fixed_costs_of_small_transfers_follow_one_another_on_the_engines():
    # 20 tiny loads on 16 queues, all ready at once: one fixed cost at a time, so one ends every dma_fixed_ns
    # (their bytes stream in a few ns, while the next one's fixed cost runs), whatever the number of queues
    t = get_target("trn2")
    prof = nki.benchmark(many_loads, nki.spec((128, 80), "float32"), target="trn2")
    ends = _ends(prof)
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    assert gaps == pytest.approx([t.dma_fixed_ns] * 19)
    one = prof.schedule.templates[prof.schedule.template[_dma(prof)[0]]]
    assert ends[0] == pytest.approx(t.dma_fixed_ns + one.payload_ns)  # a lone transfer: fixed cost, then its bytes
    assert prof.bottleneck == "dma" and prof.engine_busy["dma"] > 0.9 > 0.1 > prof.dma_streaming


@nki.jit
def wide_loads(x, n=6):
    """``n`` independent loads of [128, F] row tiles."""
    f = x.shape[1]
    out = nl.ndarray((128, n * f), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, n * f), dtype=x.dtype, buffer=nl.sbuf)
    for k in range(n):  # unrolled, each into its own slice: nothing orders them but the DMA engines
        nisa.dma_copy(dst=t[:, k * f:(k + 1) * f], src=x[k * 128:(k + 1) * 128, :])
    nl.store(out, value=nl.copy(t))
    return out


@pytest.mark.parametrize("row_bytes", [1024, 8192])
def test_a_transfer_that_streams_longer_than_the_fixed_cost_hides_the_next_one(row_bytes):
    # back to back: a transfer every max(fixed cost, streaming time) -- 1 KiB rows are bound by the fixed cost,
    # 8 KiB rows (8 rows x 8 KiB per engine: 2.8 us on trn2) hide it (§3.4 "fully amortizes" from 4 KiB)
    t = get_target("trn2")
    prof = nki.benchmark(wide_loads, nki.spec((128 * 6, row_bytes // 4), "float32"), target="trn2")
    s = prof.schedule
    loads = [k for k in _dma(prof) if s.templates[s.template[k]].opcode == "nisa.dma_copy"][:6]
    one = s.templates[s.template[loads[0]]]
    ends = sorted(s.end[k] for k in loads)
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    assert gaps == pytest.approx([max(t.dma_fixed_ns, one.payload_ns)] * 5, rel=1e-6)
    assert (one.payload_ns > t.dma_fixed_ns) == (row_bytes * t.dma_partitions_per_engine / t.dma_engine_bytes_per_ns
                                                 > t.dma_fixed_ns)  # fmt: skip


def test_hardware_dge_transfers_do_not_wait_for_the_engines_fixed_costs():
    # with the DGE, the fixed cost is the 600 ns instruction on one of two instances: two transfers per 600 ns
    t = get_target("trn2")
    prof = nki.benchmark(many_loads, nki.spec((128, 80), "float32"), dge=True, target="trn2")
    ends = _ends(prof)[:16]  # one per queue (the 17th waits for its queue's first)
    assert ends[14] - ends[0] == pytest.approx(7 * t.dge_fixed_ns, rel=1e-6)
    assert ends[15] < 16 * t.dma_fixed_ns / 2
