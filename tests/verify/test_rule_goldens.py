"""Every verifier rule has a golden message, and every golden reads as ``file.py:LINE: op: message``."""

import re
from pathlib import Path

import pytest

from nki_dsl.verify.rules import RULE_IDS

GOLDEN_DIR = Path(__file__).parent / "golden"

LINE = re.compile(r"^[\w.]+\.py:\d+: [\w.]+: \S.*$")


@pytest.mark.parametrize("rule", RULE_IDS)
def test_each_rule_has_a_golden(rule):
    assert (GOLDEN_DIR / f"{rule}.txt").exists(), f"no golden for rule {rule}: add tests/verify/test_rule_*.py"


@pytest.mark.parametrize("path", sorted(GOLDEN_DIR.glob("*.txt")), ids=lambda p: p.stem)
def test_goldens_name_file_line_and_op(path):
    assert any(path.stem == r or path.stem.startswith(r + "-") for r in RULE_IDS), f"{path.name}: no such rule"
    for line in path.read_text().splitlines():
        assert LINE.match(line), line
