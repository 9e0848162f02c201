"""The model against figures derived here from the target constants and reference/nki.md formulas (never from
the simulator's own output)."""

import json

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.targets import get_target
from tests.simulator.support import load_store, one_matmul, resident_matmuls, simulate, tiled_add


def _durations(prof, opcode):
    s = prof.schedule
    return [s.end[k] - s.start[k] for k in range(len(s)) if s.templates[s.template[k]].opcode == opcode]


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_one_bf16_matmul_128x128x512(target):
    t = get_target(target)
    _, prof = simulate(one_matmul, nki.spec((128, 128), "bfloat16"), nki.spec((128, 512), "bfloat16"), target=target)
    # §2.3: max(min(64, N_stationary=128), N_moving=512) = 512 Tensor-engine cycles.
    expected_ns = 512 / t.tensor_ghz
    assert _durations(prof, "nisa.nc_matmul") == [pytest.approx(expected_ns)]
    assert prof.unit_busy_ns["tensor"] == pytest.approx(expected_ns)
    assert prof.tensor_flops == 2 * 128 * 128 * 512


def test_fp32_matmul_is_four_times_bf16():
    specs = {dt: (nki.spec((128, 128), dt), nki.spec((128, 512), dt)) for dt in ("bfloat16", "float32")}
    busy = {dt: simulate(resident_matmuls, *s)[1].unit_busy_ns["tensor"] for dt, s in specs.items()}
    assert busy["float32"] / busy["bfloat16"] == pytest.approx(4.0)  # §3.2 "FP32 ~4x slower"
    lat = {dt: simulate(resident_matmuls, *s)[1].latency_ns for dt, s in specs.items()}
    assert 3.0 < lat["float32"] / lat["bfloat16"] <= 4.0  # the loads and the store do not slow down


def _engine_ns(t, rows, row_bytes):
    """The busiest DMA engine's time on a transfer of ``rows`` contiguous rows (§3.4): it serves 8 of them, each one
    descriptor costing the time to stream 256 B (the payload curve's knee) plus its bytes at peak, then writes
    its completion semaphore (one more descriptor, 4 B)."""
    bw = t.dma_engine_bytes_per_ns
    return min(rows, 8) * (256 + row_bytes) / bw + (256 + 4) / bw


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_dma_of_32_kib_per_partition(target):
    t = get_target(target)
    _, prof = simulate(load_store, nki.spec((128, 8192), "float32"), target=target)
    # 128 partitions x 32 KiB, one descriptor per partition, 16 engines of 8 partitions each (§3.4)
    nbytes = 128 * 32 * 1024
    expected = t.dma_fixed_ns + _engine_ns(t, 128, 32 * 1024)
    load, store = _durations(prof, "nisa.dma_copy")
    assert load == pytest.approx(expected)
    assert prof.latency_ns == pytest.approx(2 * expected)  # the store waits for the load (RAW)
    assert prof.hbm_bytes == 2 * nbytes


def test_small_transfers_are_overhead_bound():
    t = get_target("trn2")
    _, small = simulate(load_store, nki.spec((128, 32), "float32"))  # 128 B per partition
    _, big = simulate(load_store, nki.spec((128, 1024), "float32"))  # 4 KiB per partition
    per_byte = [p.dma_engine_busy_ns / p.hbm_bytes for p in (small, big)]
    # each descriptor costs as much as streaming 256 B (§3.4 knee): 128 B rows run at 128 / (128 + 256) of peak,
    # 4 KiB rows at 4096 / (4096 + 256); both add one semaphore descriptor per engine per transfer
    semaphores = 2 * 16 * (256 + 4) / t.dma_engine_bytes_per_ns  # two transfers (load, store)

    def expected(row):
        nbytes = 2 * 128 * row
        return (nbytes * (row + 256) / row / t.dma_engine_bytes_per_ns + semaphores) / nbytes

    assert per_byte[0] == pytest.approx(expected(128))
    assert per_byte[1] == pytest.approx(expected(4096))
    assert per_byte[0] / per_byte[1] > 2.5  # severely overhead-bound below 256 B


def test_large_elementwise_kernel_is_hbm_bound():
    t = get_target("trn2")
    shape = (4096, 2048)
    _, prof = simulate(tiled_add, nki.spec(shape, "float32"), nki.spec(shape, "float32"))
    hbm = 3 * 4 * shape[0] * shape[1]  # two loads and one store, fp32
    assert prof.hbm_bytes == hbm
    transfers = 3 * shape[0] // 128
    # the DMA engines' work: every transfer costs its busiest engine _engine_ns, the same on all 16 engines
    floor = transfers * _engine_ns(t, 128, 4 * shape[1])
    # Vector: one [128, 2048] fp32 add per tile, max(MIN_II, 2N) cycles (§2.3), far below the DMA time.
    vector = (shape[0] // 128) * 2 * shape[1] / t.vector_ghz
    assert vector < floor / 2
    assert prof.bottleneck == "dma"
    # At least the streaming floor, and above it only by the pipeline's fill and drain: the first load's fixed cost
    # before any byte streams, then after the last byte loaded the last add and the last store's fixed cost. Every
    # transfer streams as soon as bandwidth is free (dma_pool), so nothing else may add up.
    one_add = 2 * shape[1] / t.vector_ghz
    assert floor <= prof.latency_ns + 1e-6
    assert prof.latency_ns <= floor + 2 * t.dma_fixed_ns + one_add + 1e-6
    assert prof.hbm_bandwidth_fraction > 0.9
    assert prof.roofline_bound == "memory"


def test_numbers_mode_outputs_equal_the_numpy_reference():
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((256, 512)).astype(np.float32) for _ in range(2))
    out, prof = simulate(tiled_add, x, y)
    np.testing.assert_array_equal(out, tiled_add(x, y))
    assert prof.latency_ns > 0


def test_timing_only_mode_returns_no_outputs():
    out, prof = simulate(tiled_add, nki.spec((256, 512), "float32"), nki.spec((256, 512), "float32"))
    assert out is None and prof.instructions == 2 * 4  # per row tile: two loads, the add, the store


def test_chrome_trace_has_one_track_per_engine_used(tmp_path):
    _, prof = simulate(one_matmul, nki.spec((128, 128), "bfloat16"), nki.spec((128, 512), "bfloat16"))
    path = tmp_path / "trace.json"
    prof.save_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    used = {e["tid"] for e in events if e["ph"] == "X"}
    assert set(tracks) == used
    names = set(tracks.values())
    assert {"tensor", "vector"} <= names and sum(n.startswith("dma") for n in names) == 3  # 2 loads + 1 store
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in events if e["ph"] == "X")


def test_summary_and_compare(capsys):
    from rich.console import Console

    a = simulate(resident_matmuls, nki.spec((128, 128), "bfloat16"), nki.spec((128, 512), "bfloat16"))[1]
    b = simulate(resident_matmuls, nki.spec((128, 128), "float32"), nki.spec((128, 512), "float32"))[1]
    a.summary(console=Console(width=140))
    text = capsys.readouterr().out
    assert "tensor" in text and "critical path" in text and "Tensor-engine utilisation" in text
    cmp = a.compare(b)
    assert cmp["latency_us"][2] == pytest.approx(b.latency_us / a.latency_us)


def test_blocked_matmul_reuses_its_loads_and_naive_tiled_does_not():
    from benchmarks.simulator_speed import run
    from kernels.matmul import matmul_tiled

    # [4096, 8192] x [8192, 8192]: timing only, about a second each. Both kernels move tiles of at most 2 KiB per
    # partition, too short to hide a transfer's fixed cost (§3.4), so both are bound by the DMA engines; the blocked
    # one issues a sixth of the transfers. (The fully blocked tutorial kernel reaches the Tensor engine's peak:
    # test_fidelity.)
    blocked, _, _ = run(4096, 8192, 8192)
    naive = simulate(matmul_tiled, nki.spec((8192, 4096), "bfloat16"), nki.spec((8192, 8192), "bfloat16"))[1]
    assert blocked.bottleneck == naive.bottleneck == "dma"
    assert 4 * blocked.latency_ns < naive.latency_ns
    assert naive.tensor_engine_utilisation < 0.1 < 0.3 < blocked.tensor_engine_utilisation


    assert blocked.tensor_flops == 2 * 4096 * 8192 * 8192
