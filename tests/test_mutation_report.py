"""The mutation report (scripts/mutation_report.py): the 95% Wilson interval printed with a sampled kill rate, and
MUTATION_EXCLUDE leaving already-measured modules out of the samples and the figures of the packages around them,
the warning that a changed [tool.mutmut] makes mutmut drop every result, and name lists the shell reads safely."""

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


def _stats(root: Path, fingerprint: dict[str, str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "mutmut-stats.json").write_text(json.dumps({"config_fingerprint": fingerprint}))


_MAPPED = {"test_execution": "a1", "test_selection": "b1", "timeout": "c1", "type_check": "d1"}


def test_a_changed_test_selection_or_pytest_arguments_is_reported_as_dropping_the_stored_results(tmp_path):
    _stats(tmp_path, _MAPPED)
    assert report.config_changed(tmp_path, now=dict(_MAPPED, test_selection="b2")) == [
        "pytest_add_cli_args_test_selection"]  # fmt: skip
    assert report.config_changed(tmp_path, now=dict(_MAPPED, test_execution="a2", test_selection="b2")) == [
        "pytest_add_cli_args", "pytest_add_cli_args_test_selection"]  # fmt: skip


def test_settings_mutmut_keeps_results_through_are_not_reported(tmp_path):
    _stats(tmp_path, _MAPPED)
    assert report.config_changed(tmp_path, now=dict(_MAPPED)) == []
    assert report.config_changed(tmp_path, now=dict(_MAPPED, timeout="c2", type_check="d2")) == []


def test_a_mutants_directory_never_mapped_has_nothing_to_drop(tmp_path):
    assert report.config_changed(tmp_path / "absent", now=_MAPPED) == []
    _stats(tmp_path, {})  # mutmut before fingerprints: it compares nothing either
    assert report.config_changed(tmp_path, now=_MAPPED) == []
    (tmp_path / "mutmut-stats.json").write_text("{trunc")
    assert report.config_changed(tmp_path, now=_MAPPED) == []


def _pyproject(root: Path, selected: str) -> None:
    root.joinpath("pyproject.toml").write_text(
        f'[tool.mutmut]\nsource_paths = ["src"]\npytest_add_cli_args_test_selection = ["{selected}"]\n')


def test_the_fingerprint_compared_is_mutmuts_own_for_this_configuration(tmp_path, monkeypatch):
    configuration = pytest.importorskip("mutmut.configuration")  # the mutation extra
    _pyproject(tmp_path, "tests/a")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(configuration, "_config", None)
    _stats(tmp_path / "mutants", configuration.config().config_fingerprint())
    assert report.config_changed(Path("mutants")) == []
    _pyproject(tmp_path, "tests/b")
    monkeypatch.setattr(configuration, "_config", None)
    assert report.config_changed(Path("mutants")) == ["pytest_add_cli_args_test_selection"]


def test_no_names_print_no_line(tmp_path, monkeypatch, capsys):
    """An empty line would reach mutmut as one empty mutant name (a resumed run with nothing left)."""
    (tmp_path / "mutants").mkdir()
    monkeypatch.chdir(tmp_path)
    assert report.main(["--pending", "hub_client.paths.*"]) == 0
    assert capsys.readouterr().out == ""
