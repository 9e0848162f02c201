"""The mutation report (scripts/mutation_report.py): the 95% Wilson interval printed with a sampled kill rate, and
MUTATION_EXCLUDE leaving already-measured modules out of the samples and the figures of the packages around them."""

import importlib.util
import json
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).parents[1] / "scripts/mutation_report.py"
_SPEC = importlib.util.spec_from_file_location("mutation_report", _SCRIPT)
report = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(report)


@pytest.mark.parametrize(("killed", "tested", "low", "high"), [
    (0, 10, 0.0, 27.8),  # textbook values (Wilson 1927; Newcombe 1998, table I)
    (9, 10, 59.6, 98.2),
    (10, 10, 72.2, 100.0),
    (90, 100, 82.6, 94.5),
])  # fmt: skip
def test_the_interval_of_a_sampled_rate_is_wilsons(killed, tested, low, high):
    assert report._wilson(killed, tested) == f"[{low:.1f}%, {high:.1f}%]"


def test_no_mutant_run_gives_no_interval():
    assert report._wilson(0, 0) == ""


def test_excluded_modules_are_left_out_of_the_package_around_them_but_not_out_of_themselves(monkeypatch):
    monkeypatch.setenv("MUTATION_EXCLUDE", "hub_client/fetch.py hub_client/server/names.py")
    skip = report.excluded()
    assert skip == ["hub_client/fetch", "hub_client/server/names"]
    assert report._in_rest("hub_client", "hub_client/api.py", skip)
    assert not report._in_rest("hub_client", "hub_client/fetch.py", skip)
    assert not report._in_rest("hub_client", "hub_client/server/names.py", skip)
    assert report._in_rest("hub_client/server", "hub_client/server/auth.py", skip)
    assert not report._in_rest("hub_client/server", "hub_client/server/names.py", skip)
    assert report._in_rest("hub_client/fetch", "hub_client/fetch.py", skip)  # naming it runs it
    assert not report._in_rest("hub_client", "hub_client_other/x.py", skip)


def _meta(root: Path, source: str, codes: dict[str, int | None]) -> None:
    meta = root / (source + ".meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}))


def test_the_report_prints_the_package_and_its_rest_without_the_excluded_modules(tmp_path, monkeypatch, capsys):
    _meta(tmp_path / "mutants", "hub_client/fetch.py", {"f1": 1, "f2": 0})
    _meta(tmp_path / "mutants", "hub_client/api.py", {"a1": 1, "a2": 1, "a3": 33, "a4": None})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUTATION_EXCLUDE", "hub_client/fetch.py")
    assert report.main(["hub_client"]) == 0
    lines = {line.split("  ")[0].strip(): line.split() for line in capsys.readouterr().out.splitlines() if line}
    assert lines["hub_client"][1:6] == ["3", "1", "1", "1", "60.0%"]
    assert lines["hub_client w/o excluded"][3:8] == ["2", "0", "1", "1", "66.7%"]
