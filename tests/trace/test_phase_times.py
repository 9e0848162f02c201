"""``nki.phase_times``: every phase of a first call, in order, for a valid kernel; the verifier's error for an
invalid one. And ``benchmarks/trace_verify_speed.py`` prints its table (figures printed, never asserted)."""

import sys

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.softmax import softmax_rows
from nki_dsl.passes import pipeline
from nki_dsl.verify.rules import PLACING, RULE_IDS


@pytest.mark.parametrize("each_pass", [False, True], ids=["default", "check-each-pass"])
def test_every_phase_is_timed_in_the_order_it_runs(each_pass, monkeypatch):
    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", each_pass)
    times = nki.phase_times(softmax_rows, nki.spec((256, 64), "float32"), target="trn1")
    placing = RULE_IDS[len(RULE_IDS) - len(PLACING):]  # they run last, after the lowering they read
    expected = ["trace", "verify program facts", *(f"verify {r}" for r in RULE_IDS if r not in placing),
                "verify lower-language", *(f"verify {r}" for r in placing)]  # fmt: skip
    for p in pipeline.PIPELINE:
        expected += [f"pass {p.name}", f"verify after {p.name}"] if each_pass else [f"pass {p.name}"]
    assert list(times) == expected + ["allocate"]
    assert all(t >= 0 for t in times.values()) and sum(times.values()) > 0


@nki.jit
def _reads_past_the_end(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x[nl.ds(64, 128), :]))
    return out


def test_an_invalid_kernel_raises_what_its_call_raises():
    x = np.zeros((128, 64), np.float32)
    with pytest.raises(nki.NkiVerificationError) as timed:
        nki.phase_times(_reads_past_the_end, x)
    with pytest.raises(nki.NkiVerificationError) as called:
        _reads_past_the_end(x)
    assert str(timed.value) == str(called.value) and "out-of-bound" in str(timed.value)


def test_the_benchmark_prints_a_row_per_size_and_the_growth(monkeypatch, capsys):
    from benchmarks import trace_verify_speed

    argv = ["trace_verify_speed.py", "--seqlens", "512", "1024", "--repeat", "1", "--kernels", "flash_attn_bwd"]
    monkeypatch.setattr(sys, "argv", argv)
    assert trace_verify_speed.main() == 0
    out = capsys.readouterr().out
    assert out.count("\nflash_attn_bwd ") == 2 and "slowest phases: " in out and "growth seqlen 512 -> 1024" in out
