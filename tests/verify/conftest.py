"""Fixtures for the verifier tests: golden diagnostics and ways to get a kernel's IR.

Goldens are the whole ``str(NkiVerificationError)`` per rule, in ``golden/<rule>.txt``. Regenerate them with
``NKI_UPDATE_GOLDEN=1 python3 -m pytest tests/verify`` and read every changed message before keeping it.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import pytest

import nki_dsl as nki
from nki_dsl.errors import NkiVerificationError, SourceLoc
from nki_dsl.passes.verifier import check

GOLDEN_DIR = Path(__file__).parent / "golden"


@pytest.fixture
def golden():
    """``golden(rule, error)``: the error lists only ``rule`` and reads exactly as ``golden/<rule>.txt``.
    ``golden(rule, error, case)`` compares with ``golden/<rule>-<case>.txt``, for a rule with several faces."""

    def compare(rule: str, error: NkiVerificationError, case: str = "") -> None:
        assert {d.rule for d in error.diagnostics} == {rule}, str(error)
        text = str(error) + "\n"
        path = GOLDEN_DIR / (f"{rule}-{case}.txt" if case else f"{rule}.txt")
        if os.environ.get("NKI_UPDATE_GOLDEN") == "1":
            path.write_text(text)
            return
        assert path.exists(), f"no golden {path.name}; run with NKI_UPDATE_GOLDEN=1 and review it"
        assert text == path.read_text()

    return compare


@pytest.fixture
def rejected():
    """``rejected(kernel, *args)``: trace the kernel and return the verification error it must raise."""

    def trace(kernel, *args, **kwargs) -> NkiVerificationError:
        with pytest.raises(NkiVerificationError) as info:
            nki.trace(kernel, *args, **kwargs)
        return info.value

    return trace


@pytest.fixture
def traced():
    """``traced(kernel, *args)``: the verified IR of a valid kernel, to be altered as a parser might. A copy: the
    kernel's trace cache keeps the original, which other tests may trace again."""

    def trace(kernel, *args, **kwargs):
        return copy.deepcopy(nki.trace(kernel, *args, **kwargs).ir)

    return trace


@pytest.fixture
def reverified():
    """``reverified(ir)``: verify altered IR again and return the error it must raise."""

    def run(ir, target: str = "trn2") -> NkiVerificationError:
        with pytest.raises(NkiVerificationError) as info:
            check(ir, nki.get_target(target))
        return info.value

    return run


@pytest.fixture
def here():
    """``here()``: the source location of the calling test line, for hand-built ops."""

    def loc() -> SourceLoc:
        frame = sys._getframe(1)
        return SourceLoc(frame.f_code.co_filename, frame.f_lineno)

    return loc
