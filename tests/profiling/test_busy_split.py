"""Profile.busy_split: for each engine and DMA queue, useful work, fixed overheads, contention for the DMA engines
and waiting on dependencies, from the template prices (reference/nki.md §2.3, §3.3, §3.4); the Chrome trace shows
the same split."""

import json

import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from benchmarks.fidelity import exp_chain  # the calibration row's micro-kernel: tiny dependent exps
from nki_dsl.targets import get_target


def test_tiny_dependent_instructions_are_mostly_overhead_and_wait_for_the_load():
    t = get_target("trn1")
    prof = nki.benchmark(exp_chain, nki.spec((128, 1), "float32"), reps=4, target="trn1")
    sc = prof.busy_split["scalar"]
    # 4 activations of N = 1: one element of work each (§2.3 max(MIN_II, N)); the rest is the MIN_II floor and the
    # static / access overheads (§3.3)
    assert sc["useful"] == pytest.approx(4 * 1 / t.scalar_ghz)
    assert sc["useful"] + sc["overhead"] + sc["contention"] == pytest.approx(prof.unit_busy_ns["scalar"])
    assert sc["contention"] == 0.0
    # before the first activation the Scalar engine waited for the load
    s = prof.schedule
    first = min(k for k in range(len(s)) if s.units[s.unit[k]] == "scalar")
    assert sc["waiting"] == pytest.approx(s.start[first])


@nki.jit
def copy_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(x[i * 128:(i + 1) * 128, :]))
    return out


def test_dma_queue_time_splits_into_bytes_overheads_and_contention():
    t = get_target("trn2")
    prof = nki.benchmark(copy_rows, nki.spec((128 * 32, 64), "bfloat16"), target="trn2")  # 128 B rows
    queues = {u: v for u, v in prof.busy_split.items() if u.startswith("dma")}
    assert len(queues) == t.dma_queues_per_engine  # 64 transfers dealt round-robin to the 16 queues
    for u, v in queues.items():
        assert v["useful"] + v["overhead"] + v["contention"] == pytest.approx(prof.unit_busy_ns[u])
        # each transfer pays the ~1300 ns fixed cost (§3.4), and its 128 B rows' descriptors cost twice their
        # bytes (the 256 B knee): overhead dominates
        assert v["overhead"] > 4 * t.dma_fixed_ns and v["overhead"] > 10 * v["useful"]
    # the 16 queues' transfers take turns for the engines (one fixed cost at a time, §3.4): they wait for them
    assert sum(v["contention"] for v in queues.values()) > 0


def test_trace_shows_the_split(tmp_path):
    prof = nki.benchmark(exp_chain, nki.spec((128, 1), "float32"), reps=4, target="trn1")
    path = tmp_path / "t.json"
    prof.save_trace(path)
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    instructions = [e for e in events if e["cat"] == "instruction"]
    assert len(instructions) == prof.instructions
    assert all("useful_ns" in e["args"] and "overhead_ns" in e["args"] for e in instructions)
    waits = [e for e in events if e["cat"] == "waiting"]
    assert any(e["args"]["on"] == "dma_copy" for e in waits)  # the first activation waits for the load
    names = {e["name"] for e in events if e["cat"] == "dma split"}
    assert names == {"fixed cost", "stream"}


def test_summary_lists_the_split(capsys):
    from rich.console import Console

    prof = nki.benchmark(copy_rows, nki.spec((128 * 4, 64), "bfloat16"), target="trn2")
    prof.summary(console=Console(width=200))
    out = capsys.readouterr().out
    assert "useful (us)" in out and "waiting on deps (us)" in out and "dma0" in out
