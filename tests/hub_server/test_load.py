"""The load benchmark as a test: 8 clients x (200 reads + 20 publishes) at once, no failure, fsck clean."""

from __future__ import annotations

import pytest

from benchmarks.registry_load import run


@pytest.mark.slow
def test_registry_under_load_fails_no_request_and_stays_consistent(tmp_path):
    report = run(clients=8, reads=200, publishes=20, root=tmp_path / "hub")
    assert report.failures == []
    assert report.fsck_ok, report.fsck_output
    assert sum(len(samples) for samples in report.latencies.values()) == 8 * 220
    assert len(report.latencies["publish"]) == 8 * 20
