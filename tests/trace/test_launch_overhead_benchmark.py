"""``benchmarks/launch_overhead.py`` prints a row per kernel and backend (figures printed, never asserted)."""

import sys


def test_the_benchmark_prints_a_row_per_kernel_and_backend(monkeypatch, capsys):
    from benchmarks import launch_overhead

    argv = ["launch_overhead.py", "--rounds", "1", "--sample-ms", "1", "--backends", "numpy"]
    monkeypatch.setattr(sys, "argv", argv)
    assert launch_overhead.main() == 0
    rows = capsys.readouterr().out.splitlines()
    assert "overhead/plain" in rows[0]
    assert [r.split()[0] for r in rows[1:]] == ["tensor_add", "vit_attn"] and all(" numpy " in r for r in rows[1:])
