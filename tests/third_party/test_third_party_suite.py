"""Kernels and test harnesses written as a user of AWS's NKI stack writes them (tests/third_party/aws_style: they
import only ``nki`` / ``neuronxcc.nki``, NumPy and ml_dtypes), run unmodified through ``python -m nki_dsl.compat -m
pytest`` in a subprocess, as their author would run them. Their ``nki.simulate(kernel)`` calls run on the engine
simulator, direct launches on the NumPy reference; the slow run adds the larger shapes and sends every direct
launch to the simulator too (``NKI_SIMULATOR=1``)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).parent / "aws_style"
KERNEL_FILES = sorted(p.name for p in SUITE.glob("*.py") if not p.name.startswith(("test_", "conftest")))
TEST_FILES = sorted(p.name for p in SUITE.glob("test_*.py"))


def _pytest(*args, env=None):
    cmd = [sys.executable, "-m", "nki_dsl.compat", "-m", "pytest", str(SUITE), "-p", "no:cacheprovider", "-rfE",
           *args]  # fmt: skip
    return subprocess.run(cmd, cwd=SUITE, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=1800)  # fmt: skip


def _passed(result) -> int:
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    summary = out.strip().splitlines()[-1]
    assert not re.search(r"failed|error|skipped|xfail", summary), summary  # every test ran and passed
    return int(re.search(r"(\d+) passed", summary).group(1))


def test_the_suite_is_third_party_code():
    """It imports AWS's module names only, never nki_dsl, and every kernel module has a test file."""
    for name in KERNEL_FILES + TEST_FILES + ["conftest.py"]:
        source = (SUITE / name).read_text()
        assert "nki_dsl" not in source, name
        assert re.search(r"^\s*(import nki\b|from nki\b|from neuronxcc\b|import neuronxcc\b)", source, re.M) or (
            name == "conftest.py"), name  # fmt: skip
    assert {f"test_{k}" for k in KERNEL_FILES} <= set(TEST_FILES)


def test_third_party_suite_runs_unmodified():
    assert _passed(_pytest("-m", "not slow")) >= 70


@pytest.mark.slow
def test_third_party_suite_in_full_with_direct_launches_on_the_simulator():
    assert _passed(_pytest(env={"NKI_SIMULATOR": "1"})) >= 90
