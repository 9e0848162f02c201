"""Re-run surviving mutants each in a fresh interpreter, and record what that run says.

Usage: python scripts/mutation_recheck.py [--dry-run | --no-record] [NAME_OR_GLOB ...]
       (default: every survivor in mutants/; --dry-run lists them with their test counts; --no-record only prints,
       for use while mutmut itself still runs and rewrites the .meta files)

Why: with ``process_isolation = "fork"`` mutmut forks each mutant's run from the process that ran the clean
tests, so every cache those tests filled (a module-level kernel's compiled program, its simulated profile) is
inherited, and the mutated function may never run again: ``simulator.cost._matmul_mx`` returning
``min(64, )`` (a TypeError on every MX matmul) survived so, and failed 5 tests when run by hand. pyproject now
asks for mutmut's fork server, whose workers start clean; this re-checks the survivors of a run made without it.
Each mutant runs the tests mutmut mapped to its function (cheapest first, tests/mutation_order.py), with ``-x``,
in ``mutants/``; a failure is recorded as killed (exit code 1) in the mutant's ``.meta``, a pass stays survived.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutation_report import results  # noqa: E402 (a sibling script, not a package)

ROOT = Path("mutants")


def survivors(patterns: list[str]) -> list[tuple[str, str]]:
    found = results(ROOT)
    return [(n, src) for n, (src, status) in sorted(found.items())
            if status == "survived" and (not patterns or any(fnmatchcase(n, p) for p in patterns))]  # fmt: skip


def tests_of(name: str, stats: dict) -> list[str]:
    return sorted(stats["tests_by_mangled_function_name"].get(name.partition("__mutmut_")[0], []))


def recheck(name: str, tests: list[str]) -> int:
    """The exit code of pytest on ``tests`` with ``name`` switched on, in a fresh interpreter in mutants/."""
    env = dict(os.environ, MUTANT_UNDER_TEST=name)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    return subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def record(source: str, name: str, code: int) -> None:
    meta = ROOT / (source + ".meta")
    data = json.loads(meta.read_text())
    data["exit_code_by_key"][name] = code
    meta.write_text(json.dumps(data, indent=4))


def main(argv: list[str]) -> int:
    dry, keep = argv[:1] == ["--dry-run"], argv[:1] != ["--no-record"]
    if argv[:1] in (["--dry-run"], ["--no-record"]):
        argv = argv[1:]
    stats = json.loads((ROOT / "mutmut-stats.json").read_text())
    todo = survivors(argv)
    for name, source in todo:
        tests = tests_of(name, stats)
        if dry:
            print(f"{len(tests):>6} tests  {name}")
            continue
        code = recheck(name, tests)
        verdict = "killed" if code == 1 else "survived" if code == 0 else f"exit {code}"
        print(f"{verdict:<9} {name}", flush=True)
        if keep and code in (0, 1):  # anything else (a crash of pytest itself, 2-5) is left for a look by hand
            record(source, name, code)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
