"""docs/legacy_api_coverage.md stays true: every API row's name resolves (an ``absent`` one does not), a ``works``
row's test file exists and mentions the name, a ``refused`` row's call raises NkiApiError with the quoted reason,
and every idiom row's test function exists."""

import inspect
import re
from pathlib import Path

import pytest

import nki_dsl
import nki_dsl.compiler
import nki_dsl.isa
import nki_dsl.language
from nki_dsl.errors import NkiApiError

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "legacy_api_coverage.md"
MODULES = {"nki": nki_dsl, "nl": nki_dsl.language, "nisa": nki_dsl.isa, "ncc": nki_dsl.compiler}
STATUSES = ("works", "refused", "differs", "absent")
ROW = re.compile(r"^\| (?P<what>[^|]+) \| (?P<status>\w+) \| (?P<evidence>.+) \|$")


def _rows():
    out = []
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m and m["status"] != "status" and not set(m["what"]) <= {"-"}:
            out.append((m["what"].strip(), m["status"], m["evidence"].strip()))
    return out


ROWS = _rows()
API = [r for r in ROWS if re.fullmatch(r"`(nki|nl|nisa|ncc)\.\w+`", r[0])]
IDIOMS = [r for r in ROWS if r not in API]


def _required_positional(fn) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is p.empty for p in inspect.signature(fn).parameters.values())


def _resolve(name: str):
    prefix, attr = name.strip("`").split(".")
    return getattr(MODULES[prefix], attr, None)


def test_the_page_has_its_tables():
    assert len(API) > 150 and len(IDIOMS) > 10
    assert {s for _, s, _ in ROWS} <= set(STATUSES)
    names = [n for n, _, _ in API]
    assert len(names) == len(set(names)), "a name is listed twice"


@pytest.mark.parametrize("name, status, evidence", API, ids=[r[0].strip("`") for r in API])
def test_an_api_row_is_true(name, status, evidence):
    value = _resolve(name)
    if status == "absent":
        assert value is None, f"{name} exists now: update docs/legacy_api_coverage.md"
        return
    assert value is not None, f"{name} does not exist"
    bare = name.strip("`").split(".")[1]
    if status == "works":
        path = ROOT / evidence
        assert path.is_file(), f"{name}: {evidence} is not a file"
        assert re.search(rf"\b{bare}\b", path.read_text()), f"{name}: {evidence} does not mention {bare}"
    elif status == "refused":
        reason = re.fullmatch(r'"(.+)"', evidence)
        assert reason, f"{name}: a refusal quotes its reason"
        with pytest.raises(NkiApiError) as info:
            value(*[None] * _required_positional(value))
        assert reason[1] in str(info.value)


@pytest.mark.parametrize("idiom, status, evidence", [r for r in IDIOMS if "::" in r[2]],
                         ids=[r[2].split("::")[1] for r in IDIOMS if "::" in r[2]])  # fmt: skip
def test_an_idiom_rows_test_exists(idiom, status, evidence):
    assert status in ("works", "differs")
    path, test = evidence.split("::")
    assert re.search(rf"^def {test}\(", (ROOT / path).read_text(), re.M), f"{idiom}: no {test} in {path}"
