"""The reader behind docs/current_api_coverage.md's test (``api_usage.py``): what it counts as a use of a
current-API name, and what it does not; and the family table of scripts/current_api_test_counts.py."""

import importlib.util
import textwrap

from tests.current_api import api_usage

SOURCE = '''
import numpy as np
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.language as lnl
from nki_dsl.current.isa.constants import oob_mode
from tests.current_api.lnc_kernels import exchange_sum

OPS = [nl.exp, nl.tanh]

def helper(t):
    nisa.activation(dst=t, op=nl.exp, data=t)
    return t.reshape((128, 4, 16))

def test_direct():
    nisa.dma_copy(dst=None, src=None, oob_mode=oob_mode.skip, engine=nisa.engine.vector)

def test_through_a_helper_and_a_table():
    for op in OPS:
        helper(op)

def test_legacy_only():
    lnl.exp(np.exp(1.0))

def test_repo_kernel():
    exchange_sum[2](None)
'''


def _uses(tmp_path, name, source=SOURCE):
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(source))
    api_usage.index.cache_clear()
    api_usage._uses.cache_clear()
    return api_usage.index(path).uses(name)


def test_attribute_chains_of_current_modules_and_imported_names(tmp_path):
    used = _uses(tmp_path, "test_direct")
    assert {"nisa.dma_copy", "nisa.engine.vector", "nisa.constants.oob_mode.skip"} <= used
    assert api_usage.exercises(used, "nisa.engine") and not api_usage.exercises(used, "nisa.dma_transpose")


def test_helpers_tables_and_methods_are_followed(tmp_path):
    used = _uses(tmp_path, "test_through_a_helper_and_a_table")
    assert {"nl.exp", "nl.tanh", "nisa.activation", ".reshape"} <= used


def test_legacy_and_numpy_names_are_not_current_uses(tmp_path):
    used = _uses(tmp_path, "test_legacy_only")
    assert not api_usage.exercises(used, "nl.exp") and ".exp" in used


def test_kernels_of_repo_modules_are_followed(tmp_path):
    assert api_usage.exercises(_uses(tmp_path, "test_repo_kernel"), "nisa.sendrecv")


def test_an_alias_bound_to_two_modules_is_not_trusted(tmp_path):
    source = "import nki_dsl.current.language as nl\n\ndef test_a():\n    import nki_dsl.language as nl\n    nl.exp\n"
    assert not api_usage.exercises(_uses(tmp_path, "test_a", source), "nl.exp")


def test_a_missing_file_or_function_is_none():
    assert api_usage.uses("tests/current_api/no_such_file.py::test_x") is None
    assert api_usage.uses("tests/current_api/test_api_surface.py::test_no_such_test") is None


def test_every_current_api_test_file_is_in_a_family_of_the_counting_script():
    script = api_usage.ROOT / "scripts" / "current_api_test_counts.py"
    spec = importlib.util.spec_from_file_location("current_api_test_counts", script)
    counts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counts)
    assigned = {f for files in counts.FAMILIES.values() for f in files}
    here = {str(p.relative_to(api_usage.ROOT)) for p in (api_usage.ROOT / "tests" / "current_api").glob("test_*.py")}
    assert sorted(here - assigned) == []
    assert all((api_usage.ROOT / f).is_file() for f in assigned)
