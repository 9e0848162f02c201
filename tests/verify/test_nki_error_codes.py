"""NKI's documented error codes (reference/nki.md §5.1, §1.3) against ``docs/verifier_rules.md``: every code the
tracer enforces refuses its kernel with the golden message (``golden_trace/<code>.txt``, naming file:line) and
accepts the counterpart; the doc's table names only existing rules, and every rule is in it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import nki_dsl as nki
from nki_dsl.verify.rules import RULE_IDS
from tests.verify.nki_error_codes import NOT_CASES, TRACER_CASES, A, api_outside_bad, api_outside_good

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "verifier_rules.md"
GOLDEN = Path(__file__).parent / "golden_trace"
LINE = re.compile(r"^nki_error_codes\.py:\d+: (?:[\w.]+: )?\S.*$")


def _rows() -> dict[str, str]:
    """NKI code -> 'enforced by' cell, from the doc's code table."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`err_"):
            for code in re.findall(r"`(err_[a-z0-9_]+)`", cells[0]):
                rows[code] = cells[1]
    return rows


@pytest.mark.parametrize("code", sorted(TRACER_CASES))
def test_tracer_code_golden_and_accepted_counterpart(code):
    bad, good = TRACER_CASES[code]
    with pytest.raises(nki.NkiError) as info:
        nki.trace(nki.jit(bad), A)
    text = str(info.value) + "\n"
    assert LINE.match(text.strip()), text
    _golden(code, text)
    nki.trace(nki.jit(good), A)


def _golden(code: str, text: str) -> None:
    path = GOLDEN / f"{code}.txt"
    if os.environ.get("NKI_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden {path.name}; run with NKI_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


def test_an_nki_api_outside_a_kernel_golden_and_inside_one_accepted():
    with pytest.raises(nki.NkiError) as info:
        api_outside_bad()
    text = str(info.value) + "\n"
    assert LINE.match(text.strip()), text
    _golden("err_nki_api_outside_of_nki_kernel", text)
    nki.trace(nki.jit(api_outside_good), A)


OTHER_TRACER_CODES = {"err_nki_api_outside_of_nki_kernel"}


def test_the_doc_s_tracer_rows_and_the_cases_are_the_same_codes():
    rows = _rows()
    for code in TRACER_CASES:
        assert code in rows, f"{code} missing from docs/verifier_rules.md"
        assert "tracer" in rows[code], (code, rows[code])
    tracer_rows = {code for code, cell in rows.items() if "tracer" in cell}
    assert tracer_rows == set(TRACER_CASES) | OTHER_TRACER_CODES | NOT_CASES


def test_the_doc_names_every_rule_and_only_rules_that_exist():
    text = DOC.read_text()
    for rule in RULE_IDS:
        assert f"| `{rule}` |" in text, f"rule {rule} is not in the doc's rule table"
    known = set(RULE_IDS) | {"allocate"}
    for code, cell in _rows().items():
        for name in re.findall(r"`([a-z][a-z-]*)`", cell):
            assert name in known, f"{code}: the doc names rule {name!r}, which does not exist"


def test_every_golden_trace_file_belongs_to_a_case():
    for path in GOLDEN.glob("*.txt"):
        assert path.stem in set(TRACER_CASES) | OTHER_TRACER_CODES, path.name
