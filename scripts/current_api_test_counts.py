"""Count the current-API (NKI 0.6) tests per family, for issue 12's closing note.

    .venv/bin/python scripts/current_api_test_counts.py [--files]

Collects (pytest --collect-only, slow tests included) every test of tests/current_api and, elsewhere under tests/,
the tests that use the current API: a test whose source (or a kernel or helper it names, read as
tests/current_api/api_usage.py reads them) uses ``nki_dsl.current``'s modules, a test that goes through
``nki_dsl.compat`` (itself, a helper, a fixture or its file's ``pytestmark``), and the run of
tutorials/07_current_api.py. Each is counted in the
family its file belongs to (FAMILIES); a file no family names is reported as "unassigned", so the table cannot
silently drop one. Prints, per family: tests in the default run, slow tests, total (``--files``: per file too).
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.current_api import api_usage  # noqa: E402 - after the repo root is importable

# family -> test files (relative to the repo root). Order is the table's.
FAMILIES = {
    "nisa instructions (destination-passing form, composed ops, random)": [
        "tests/current_api/test_isa_ops.py", "tests/current_api/test_isa_ops_more.py",
        "tests/current_api/test_composed_ops.py", "tests/current_api/test_random.py",
        "tests/current_api/test_instruction_handles.py"],
    "nl convenience wrappers, dtypes, tile_size": ["tests/current_api/test_language_wrappers.py"],
    "accumulator registers across instructions (reduce_cmd, reduce_res read-out)": [
        "tests/current_api/test_accumulators.py", "tests/simulator/test_accumulator_readout_cost.py"],
    "MX matmul and packed x4 dtypes (trn3)": ["tests/current_api/test_mx_matmul.py"],
    "tensors: views, .view(dtype), .ap access patterns, address=": [
        "tests/current_api/test_views.py", "tests/current_api/test_bitcast_views.py",
        "tests/current_api/test_ap_vector_offset.py", "tests/current_api/test_address.py",
        "tests/current_api/test_address_edges.py", "tests/current_api/test_hbm_views.py",
        "tests/current_api/test_reshape.py", "tests/verify/test_hbm_view.py"],
    "dma_copy(oob_mode=skip): gathers and scatters dropping out-of-range rows": ["tests/current_api/test_oob_skip.py"],
    "specialisation: Python loops, unrolling rule, shape families": [
        "tests/current_api/test_specialization.py", "tests/trace/test_current_api_families.py"],
    "runtime control flow: registers, dynamic_range/fori_loop/while_loop, runtime offsets": [
        "tests/current_api/test_runtime_loops.py", "tests/current_api/test_runtime_offsets.py",
        "tests/current_api/test_kv_decode.py", "tests/verify/test_runtime_loops.py",
        "tests/profiling/test_runtime_loop_timing.py"],
    "two cores: kernel[2], sendrecv, core_barrier, core-race/core-sync": [
        "tests/current_api/test_lnc_collectives.py", "tests/isa/test_collectives.py",
        "tests/verify/test_rule_core_race.py", "tests/verify/test_rule_core_sync.py"],
    "entry points: nki.jit options, nki.simulate, launch, diagnostics": ["tests/current_api/test_api_surface.py",
                                                                         "tests/trace/test_tensor_tuple_args.py"],
    "unmodified third-party code: nki_dsl.compat, Hub NKI kernels": [
        "tests/current_api/test_compat.py", "tests/kernels/test_neuron_variants.py", "tests/hub/test_hf_kernels.py",
        "tests/hub/test_library_families.py", "tests/third_party/test_third_party_suite.py"],
    "conformance kernels: matmul guide, production-library style, token-gen attention": [
        "tests/current_api/test_matmul_guide.py", "tests/current_api/test_production_kernels.py",
        "tests/current_api/test_token_gen_attention.py"],
    "one IR: the op table of both front ends": ["tests/ir/test_op_table.py"],
    "tutorial 07 (both generations side by side)": ["tests/tutorials/test_tutorials.py"],
    "the coverage table (docs/current_api_coverage.md)": ["tests/current_api/test_api_coverage.py",
                                                          "tests/current_api/test_api_usage.py"],
}  # fmt: skip
COVERAGE = "the coverage table (docs/current_api_coverage.md)"
EXPLICIT = {"tests/verify/test_runtime_loops.py"}  # runtime-loop IR of the current API, read without its front end
# A test whose source (or a helper, fixture or pytestmark of its file) names this runs current-API code api_usage
# cannot follow: a script run under nki_dsl.compat, a Hub kernel importing ``nki``.
FUNCTION_MARKERS = ("nki_dsl.compat",)


class Collector:
    def __init__(self):
        self.items = []

    def pytest_collection_modifyitems(self, items):
        self.items = list(items)


def _source(rel: str, names) -> str:
    """The source of the module-level definitions ``names`` (decorators included) and of every one they name, and
    the file's ``pytestmark``."""
    file = api_usage.index(ROOT / rel)
    text = file.path.read_text()
    todo, seen, parts = [*names, "pytestmark"], set(), []
    while todo:
        name = todo.pop()
        node = file.defs.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        parts += [ast.get_source_segment(text, n) or "" for n in [*getattr(node, "decorator_list", []), node]]
        todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in file.defs]
    return "\n".join(parts)


def _is_current(item, rel: str) -> bool:
    if rel.startswith("tests/current_api/") or rel in EXPLICIT:
        return True
    if rel == "tests/tutorials/test_tutorials.py":
        return "07_current_api" in item.nodeid
    name = getattr(item, "originalname", None) or item.name
    if any(m in _source(rel, [name, *item.fixturenames]) for m in FUNCTION_MARKERS):
        return True
    used = api_usage.uses(f"{rel}::{name}") or frozenset()
    return any(u.split(".")[0] in ("nki", "nl", "nisa") for u in used)


def collect() -> list[tuple[str, bool]]:
    """(file, slow) of every current-API test."""
    files = sorted({str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "current_api").glob("test_*.py")}
                   | {f for fs in FAMILIES.values() for f in fs})  # fmt: skip
    others = [p for p in (ROOT / "tests").rglob("test_*.py") if "nki_dsl.current" in p.read_text()]
    files = sorted(set(files) | {str(p.relative_to(ROOT)) for p in others})
    collector = Collector()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
                        *files], plugins=[collector])  # fmt: skip
    if code not in (0, 5):
        raise SystemExit(f"collection failed (pytest exit code {code})")
    out = []
    for item in collector.items:
        rel = str(Path(item.path).relative_to(ROOT))
        if _is_current(item, rel):
            out.append((rel, item.get_closest_marker("slow") is not None))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="also list each file's counts")
    args = parser.parse_args()
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # pytest's own collection listing
        tests = collect()
    per_file = collections.defaultdict(lambda: [0, 0])
    for rel, slow in tests:
        per_file[rel][slow] += 1
    family_of = {f: fam for fam, fs in FAMILIES.items() for f in fs}
    family_of |= {r: "unassigned (add the file to FAMILIES)" for r in per_file if r not in family_of}
    rows = collections.defaultdict(lambda: [0, 0])
    for rel, (fast, slow) in per_file.items():
        rows[family_of[rel]][0] += fast
        rows[family_of[rel]][1] += slow
    width = max(len(f) for f in [*FAMILIES, *rows])
    print(f"{'family':<{width}}  default  slow  total")
    for fam in [*FAMILIES, *(r for r in rows if r not in FAMILIES)]:
        if fam not in rows:
            continue
        fast, slow = rows[fam]
        print(f"{fam:<{width}}  {fast:7d}  {slow:4d}  {fast + slow:5d}")
        if args.files:
            for rel in sorted(r for r in per_file if family_of[r] == fam):
                f, s = per_file[rel]
                print(f"    {rel:<{width - 4}}  {f:7d}  {s:4d}  {f + s:5d}")
    fast = sum(r[0] for r in rows.values())
    slow = sum(r[1] for r in rows.values())
    print(f"{'all current-API tests':<{width}}  {fast:7d}  {slow:4d}  {fast + slow:5d}")
    table = rows.get(COVERAGE, [0, 0])
    label = "  without the coverage table's row checks"
    print(f"{label:<{width}}  {fast - table[0]:7d}  {slow - table[1]:4d}  {fast + slow - sum(table):5d}")


if __name__ == "__main__":
    main()
