"""Suite-wide checks: every kernel any test traces must print, parse back and print identically."""

import os

# One BLAS thread: the suite's matrices are small, and a threaded OpenBLAS on a loaded 2-core machine spins for
# its workers (a flash-attention backward on NumPy took 4.0 s instead of 0.33 s). Set before NumPy is loaded; a
# caller's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes import pipeline
from nki_dsl.passes.verifier import check
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.examples import DEEP
from tests.mutation_order import pytest_collection_modifyitems  # noqa: F401 (a hook: cheapest tests first in mutation runs)

# `--hypothesis-profile deep`: every property test draws its whole declared count (tests/examples.py).
settings.register_profile(DEEP, settings.get_profile("default"))


def _round_trip(kernel, target):
    text = print_kernel(kernel)
    again = parse_kernel(text)
    assert print_kernel(again) == text, f"IR text of {kernel.name} does not round-trip"
    check(again, target)


@pytest.fixture(autouse=True, scope="session")
def round_trip_every_traced_kernel():
    TRACE_HOOKS.append(_round_trip)
    yield
    TRACE_HOOKS.remove(_round_trip)


@pytest.fixture(autouse=True, scope="session")
def check_each_pass():
    """Every pass's output verified in full (translation validation, off by default: passes/pipeline.py), so a
    pass that leaves invalid IR for any kernel the suite compiles fails the test that compiled it."""
    pipeline.CHECK_EACH_PASS = True
    yield
    pipeline.CHECK_EACH_PASS = False


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch):
    """Tests read what the CLI prints: rich's output follows the environment (FORCE_COLOR adds escape codes,
    COLUMNS sets the wrap width), so every test starts from a plain 80-column terminal whatever shell started
    pytest. A test that needs another width sets it itself."""
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "LINES", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
