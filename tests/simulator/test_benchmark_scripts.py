"""The simulator's benchmark scripts run and report what they promise (figures are printed, never asserted: no
timed assertions)."""

import sys

from benchmarks import simulator_overhead, simulator_speed


def test_overhead_benchmark_checks_outputs_and_prints_a_ratio_per_kernel(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["simulator_overhead.py", "--repeat", "1"])
    assert simulator_overhead.main() == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 + 5 + 1 and "the plain NumPy backend" in out


def test_speed_benchmark_reports_both_kernels_and_both_paths(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["simulator_speed.py", "--small", "--repeat", "1", "--no-long"])
    assert simulator_speed.main() == 0
    out = capsys.readouterr().out
    assert "blocked" in out and "naive tiled" in out and out.count("advanced)") == 2
    assert out.count(" vs one by one ") == 2 and "instructions/s" in out


def test_fidelity_benchmark_prints_every_row(monkeypatch, capsys):
    from benchmarks import fidelity

    monkeypatch.setattr(sys, "argv", ["fidelity.py", "--skip-progression"])
    assert fidelity.main() == 0  # 0: every row holds
    out = capsys.readouterr().out
    assert out.count(" yes ") == len(fidelity.micro_rows()) and "1,416.00" in out
