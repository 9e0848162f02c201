"""Kill rate per package and the surviving mutants, from the results mutmut 3 keeps in ``mutants/**/*.py.meta``.

Usage: python scripts/mutation_report.py [PACKAGE ...]   (paths such as nki_dsl/verify or hub_client)
       python scripts/mutation_report.py --sample N [PACKAGE ...]   print N mutant names per package, drawn at
       random (fixed seed) from the mutants mutmut generated, generating them first when there are none yet
       python scripts/mutation_report.py --pending PATTERN ...   print the mutants matching these names or globs
       that have no result yet (scripts/mutation.sh uses it for MUTATION_RESUME=1)
       python scripts/mutation_report.py --config-changed   print the [tool.mutmut] settings that differ from those
       the kept mutants/ was mapped with, for which mutmut drops every stored result (scripts/mutation.sh warns)

MUTATION_EXCLUDE="PATH ..." (modules or packages, e.g. hub_client's trust paths once they were run in full) leaves
those paths out of the samples drawn from a package around them, and the report adds a line for each such package
without them: "hub_client w/o excluded" is then the sampled rest, not a mix of the rest and the trust paths.

"Killed" counts mutants a test failed on, timed out on, or crashed on; "survived" those every test passed with;
"no tests" those no test reaches (also bugs that ship unnoticed, so they count against the rate). Mutants not run
yet (an interrupted run) are reported apart and left out of the rate. A surviving mutant is shown with
``mutmut show NAME``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

KILLED = {1, 3, 24, -24, 36, 152, 255, -9, -11, 37}  # fail, pytest error, timeouts (SIGXCPU), crashes, type check
SURVIVED = {0}
NO_TESTS = {5, 33}


def classify(code) -> str:
    if code is None:
        return "not run"
    if code in KILLED:
        return "killed"
    if code in SURVIVED:
        return "survived"
    if code in NO_TESTS:
        return "no tests"
    return "suspicious"


def results(root: Path) -> dict[str, tuple[str, str]]:
    """mutant name -> (source file, status)."""
    out = {}
    for meta in sorted(root.rglob("*.py.meta")):
        source = meta.relative_to(root).as_posix()[: -len(".meta")]
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            out[name] = (source, classify(code))
    return out


def _in(pkg: str, source: str) -> bool:
    return source == pkg + ".py" or source.startswith(pkg + "/")


def excluded() -> list[str]:
    """The paths of MUTATION_EXCLUDE, spelled as packages are (no trailing ``/`` or ``.py``)."""
    import os

    return _packages(os.environ.get("MUTATION_EXCLUDE", "").split(), default=[])


def _in_rest(pkg: str, source: str, skip: list[str]) -> bool:
    """``source`` lies in ``pkg`` and in none of the excluded paths strictly inside it (naming an excluded path
    itself, ``hub_client/fetch.py=all``, still reaches it)."""
    return _in(pkg, source) and not any(_in(x, source) for x in _inside(pkg, skip))


def _inside(pkg: str, paths: list[str]) -> list[str]:
    return [x for x in paths if x.startswith(pkg + "/")]


def sample(n: int, packages: list[str]) -> list[str]:
    """``n`` mutant names per package (all of them where there are fewer), the same ones on every call."""
    import random

    _generate()  # brings mutants/ up to date with the source: names must be those the run will find
    found = results(Path("mutants"))
    skip = excluded()
    names = []
    for pkg in packages:
        mine = sorted(name for name, (source, _) in found.items() if _in_rest(pkg, source, skip))
        names += sorted(random.Random(f"mutation-sample-{pkg}").sample(mine, min(n, len(mine))))
    return names


def _generate() -> None:
    """Copy the tree into mutants/ and write the mutants of every changed file, as the first step of ``mutmut run``
    does (mutmut has no command for that step alone; these are the functions ``mutmut run`` calls). Output goes to
    stderr: stdout carries the names."""
    import os

    from mutmut.__main__ import create_mutants
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    os.makedirs("mutants", exist_ok=True)
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(2)
    finally:
        sys.stdout = out


def pending(patterns: list[str]) -> list[str]:
    """The mutants matching ``patterns`` (names or mutmut's globs) that have no result yet: what an interrupted
    run left, so that a resumed run does not re-run the others."""
    from fnmatch import fnmatchcase

    found = results(Path("mutants"))
    return [n for n, (_, status) in sorted(found.items())
            if status == "not run" and any(fnmatchcase(n, p) for p in patterns)]  # fmt: skip


# mutmut 3.8's config fingerprint groups (Config.config_fingerprint) whose change makes it reset every stored result
# and map the whole suite again (_apply_config_change_invalidation), and the [tool.mutmut] setting behind each.
_RESETTING = {"test_execution": "pytest_add_cli_args", "test_selection": "pytest_add_cli_args_test_selection"}


def config_changed(root: Path, now: dict[str, str] | None = None) -> list[str]:
    """The settings behind the groups of mutmut's fingerprint ``now`` (by default that of pyproject.toml here) that
    differ from the fingerprint stored in ``root/mutmut-stats.json`` by the run that mapped the suite, compared as
    mutmut compares them: none when nothing is stored yet. Read from mutmut's own record, not a copy of it, so an
    interrupted run (which saved its map) is covered, and a comment edited in [tool.mutmut] is not a change."""
    try:
        stored = json.loads((root / "mutmut-stats.json").read_text()).get("config_fingerprint") or {}
    except (OSError, ValueError, AttributeError):
        return []
    if not stored:
        return []
    if now is None:
        from mutmut.configuration import config

        now = config().config_fingerprint()
    return [setting for group, setting in _RESETTING.items() if stored.get(group) != now.get(group)]


def _print_lines(lines: list[str]) -> None:
    """One per line, and nothing at all for none: the shell reads an empty line as one empty name, and
    ``mutmut run ''`` sets up the whole run (~30 min) to then fail on a filter that matches no mutant."""
    if lines:
        print("\n".join(lines))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--sample"]:
        _print_lines(sample(int(argv[1]), _packages(argv[2:])))
        return 0
    if argv[:1] == ["--pending"]:
        _print_lines(pending(argv[1:]))
        return 0
    if argv[:1] == ["--config-changed"]:
        _print_lines(config_changed(Path("mutants")))
        return 0
    root = Path("mutants")
    if not root.is_dir():
        print("no mutants/ directory: run scripts/mutation.sh first")
        return 1
    packages = _packages(argv)
    found = results(root)
    skip = excluded()
    print(f"{'package':<28} {'killed':>7} {'survived':>9} {'no tests':>9} {'not run':>8} {'kill rate':>10}"
          "  95% interval")  # fmt: skip
    survivors: list[tuple[str, str]] = []
    for pkg in packages:
        mine = {n: v for n, v in found.items() if _in(pkg, v[0])}
        _line(pkg, mine)
        if _inside(pkg, skip):
            _line(f"{pkg} w/o excluded", {n: v for n, v in mine.items() if _in_rest(pkg, v[0], skip)})
        survivors += [(n, s) for n, (_, s) in sorted(mine.items()) if s in ("survived", "no tests", "suspicious")]
    if survivors:
        print(f"\n{len(survivors)} mutants not killed (see each with: .venv/bin/mutmut show NAME):")
        for name, status in survivors:
            print(f"  {status:<10} {name}")
    return 0


def _line(label: str, mine: dict[str, tuple[str, str]]) -> None:
    counts = Counter(status for _, status in mine.values())
    tested = counts["killed"] + counts["survived"] + counts["no tests"] + counts["suspicious"]
    rate = f"{100 * counts['killed'] / tested:.1f}%" if tested else "-"
    print(f"{label:<28} {counts['killed']:>7} {counts['survived']:>9} {counts['no tests']:>9} "
          f"{counts['not run']:>8} {rate:>10}  {_wilson(counts['killed'], tested)}")  # fmt: skip


def _wilson(k: int, n: int, z: float = 1.96) -> str:
    """95% Wilson score interval of a kill rate k/n: what a sample of n mutants says about the package's rate (the
    normal interval is wrong near 100%, where these rates live)."""
    if n == 0:
        return ""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    low, high = max(0.0, centre - half), min(1.0, centre + half)  # at 0 or n the rounding error shows as -0.0%
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]"


def _packages(argv: list[str], default: list[str] | None = None) -> list[str]:
    if default is None:
        default = ["nki_dsl/verify", "nki_dsl/backends", "nki_dsl/passes", "hub_client"]
    return [p.rstrip("/").removesuffix(".py") for p in argv] or default


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
