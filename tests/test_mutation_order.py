"""The mutation-run test order (tests/mutation_order.py): the mutated module's own tests first, fastest first, then
the other files cheapest first with each file's tests together; the same tests either way, and no change at all
outside a mutation run."""

import json
from types import SimpleNamespace

from tests import mutation_order

DURATIONS = {"tests/hub/test_big.py::a": 5.0, "tests/hub/test_big.py::b": 0.1, "tests/hub/test_small.py::c": 1.0,
             "tests/hub_server/test_names.py::slow": 2.0, "tests/hub_server/test_names.py::fast": 0.01}  # fmt: skip
ORDER = ["tests/hub/test_big.py::a", "tests/hub_server/test_names.py::slow", "tests/hub/test_big.py::b",
         "tests/hub/test_small.py::c", "tests/hub_server/test_names.py::fast"]  # fmt: skip


def _items():
    return [SimpleNamespace(nodeid=n) for n in ORDER]


def test_the_mutated_modules_tests_come_first_then_files_by_their_total_time(tmp_path):
    stats = tmp_path / "mutmut-stats.json"
    stats.write_text(json.dumps({"duration_by_test": DURATIONS}))
    items = _items()
    mutation_order.reorder(items, "hub_client.server.names.x_repo_name__mutmut_3", stats)
    assert [i.nodeid for i in items] == ["tests/hub_server/test_names.py::fast", "tests/hub_server/test_names.py::slow",
                                         "tests/hub/test_small.py::c", "tests/hub/test_big.py::a",
                                         "tests/hub/test_big.py::b"]  # fmt: skip


def test_without_stats_only_the_module_s_own_files_move(tmp_path):
    items = _items()
    mutation_order.reorder(items, "hub_client.server.names.x_repo_name__mutmut_3", tmp_path / "missing.json")
    assert [i.nodeid for i in items][:2] == ["tests/hub_server/test_names.py::slow",
                                             "tests/hub_server/test_names.py::fast"]  # fmt: skip
    assert sorted(i.nodeid for i in items) == sorted(ORDER)


def test_outside_a_mutation_run_the_order_is_untouched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mutmut-stats.json").write_text(json.dumps({"duration_by_test": DURATIONS}))
    for value in (None, "", "stats"):
        if value is None:
            monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
        else:
            monkeypatch.setenv("MUTANT_UNDER_TEST", value)
        items = _items()
        mutation_order.pytest_collection_modifyitems(None, items)
        assert [i.nodeid for i in items] == ORDER
    monkeypatch.setenv("MUTANT_UNDER_TEST", "hub_client.server.names.x_repo_name__mutmut_3")
    items = _items()
    mutation_order.pytest_collection_modifyitems(None, items)
    assert items[0].nodeid == "tests/hub_server/test_names.py::fast"
