"""Test order inside a mutation run (scripts/mutation.sh): cheapest first, so a killed mutant stops early.

mutmut 3 runs the tests that reach a mutated function with ``-x``, in the order of a Python set (random per run).
A trust-path mutant of hub_client reaches ~300 registry tests (~3 minutes on the shared machine) while the test
that kills it is usually a millisecond unit test of that module: in random order a killed mutant cost ~20 s. Here
the tests of the files named after the mutated module come first, fastest first (``hub_client.server.names`` ->
``test_names.py``, ``verify.rules.out_of_bounds`` -> ``test_rule_out_of_bounds.py``), then the other files by their
total time in mutmut's stats, each file's tests kept together and in their order (module fixtures built once).
Outside a mutation run (no mutant named in MUTANT_UNDER_TEST) nothing changes. Which tests run is unchanged, so a
mutant's result is too; only how soon a failing one is reached."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

# Values mutmut itself puts in MUTANT_UNDER_TEST outside a mutant's run (clean run, stats, forced failure).
_NOT_A_MUTANT = {"", "stats", "fail", "list_all_tests", "mutant_generation"}


def _module_of(mutant: str) -> str:
    """``hub_client.server.names.x_repo_name__mutmut_3`` -> ``names`` (the name before the mutated function's)."""
    parts = mutant.split(".")
    return parts[-2] if len(parts) > 1 else ""


def reorder(items, mutant: str, stats_path: Path) -> None:
    try:
        durations = json.loads(stats_path.read_text())["duration_by_test"]
    except (OSError, ValueError, KeyError):
        durations = {}
    module = _module_of(mutant)
    per_file: dict[str, float] = defaultdict(float)
    for item in items:
        per_file[item.nodeid.split("::")[0]] += durations.get(item.nodeid, 0.0)

    def key(item):
        path = item.nodeid.split("::")[0]
        if module and module in Path(path).stem:
            return (0, 0.0, "", durations.get(item.nodeid, 0.0))  # the module's own tests, fastest first
        return (1, per_file[path], path, 0.0)

    items.sort(key=key)  # stable: another file's tests stay together and in their order


def pytest_collection_modifyitems(config, items):
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    stats = Path("mutmut-stats.json")  # mutmut runs the tests from mutants/, where it keeps this file
    if mutant not in _NOT_A_MUTANT and stats.is_file():
        reorder(items, mutant, stats)
