#!/usr/bin/env bash
# Mutation testing with mutmut 3 (configured in pyproject.toml, [tool.mutmut]): plant small bugs in the named
# packages one at a time, run the tests that reach each one, and print the kill rate per package and the mutants
# no test caught. Not part of the default test run (scripts/test.sh): it runs the suite many times.
#
#   bash scripts/mutation.sh                       # nki_dsl/verify nki_dsl/backends nki_dsl/passes hub_client
#   bash scripts/mutation.sh nki_dsl/verify        # one package (or a module: nki_dsl/passes/allocate.py)
#   bash scripts/mutation.sh --report [PKG...]     # only print the figures of the last run
#   MUTATION_SAMPLE=100 bash scripts/mutation.sh nki_dsl/verify hub_client/paths.py=all hub_client/fetch.py=300
#                                                  # PKG=N: that package's own sample size (all: every mutant)
#   bash scripts/mutation.sh nki_dsl/verify@names.txt  # PKG@FILE: the mutants named in FILE, one a line (a sample
#                                                  # drawn from an earlier mutant set, which PKG=N no longer draws)
#
# Environment:
#   MUTATION_JOBS=N      parallel workers (default 2)
#   MUTATION_TIMEOUT=S   seconds for the whole run (default none); the figures of what ran are printed anyway
#   MUTATION_FRESH=1     delete mutants/ first. By default mutants/ is kept: mutmut re-copies unmutated files,
#                        regenerates the mutants of changed files, keeps its test-to-function map and maps only
#                        new tests (the first run maps the whole suite, the longest step). The mutants named on
#                        the command line (every one of a package, or its sample) are run again each time.
#                        Do not edit the source while it generates.
#   MUTATION_RESUME=1    run only the selected mutants that have no result yet (after an interrupted or timed-out
#                        run: the same command with this set carries on where it stopped)
#   MUTATION_EXCLUDE="PATH ..."  paths left out of the samples of the packages around them, and a line per such
#                        package without them in the figures: hub_client=100 then samples hub_client's rest, not
#                        the trust paths already run in full (which PATH=all still runs)
#   MUTATION_SAMPLE=N    run N mutants per package drawn at random with a fixed seed: an estimate for a machine
#                        without hours to spare (a surviving mutant runs every test that reaches its function,
#                        which for the verifier is most of the suite). The figures count every mutant run so far.
# Survivors of a run made before process_isolation = "forkserver" (pyproject) may owe their survival to caches the
# clean run left: `.venv/bin/python scripts/mutation_recheck.py` re-runs each in a fresh interpreter.
# Bars (issue 15): >= 90% killed on nki_dsl/verify and hub_client's trust paths, >= 80% elsewhere. Mutants that
# cannot be killed (equivalent to the original) are listed with the reason in tests/mutation_equivalents.md.
set -euo pipefail
cd "$(dirname "$0")/.."

report_only=0
if [[ "${1:-}" == "--report" ]]; then
    report_only=1
    shift
fi
packages=("$@")
if [[ ${#packages[@]} -eq 0 ]]; then
    packages=(nki_dsl/verify nki_dsl/backends nki_dsl/passes hub_client)
fi

if [[ $report_only -eq 0 ]]; then
    [[ -x .venv/bin/python ]] || python3 -m venv .venv
    .venv/bin/python -m pip install -q -e '.[test,jax,mutation]'  # the suite the mutants face is the default one: jax too
    [[ "${MUTATION_FRESH:-0}" != "1" ]] || rm -rf mutants
    # mutmut discards every stored result (and maps the whole suite again, the longest step) when its configuration
    # (the test selection above all) differs from the one mutants/ was mapped with: say so before it happens.
    changed=$(.venv/bin/python scripts/mutation_report.py --config-changed)
    if [[ -n "$changed" ]]; then
        echo "scripts/mutation.sh: [tool.mutmut] $(echo $changed) changed in pyproject.toml since mutants/ was" \
             "mapped: mutmut will drop every stored result and map the whole suite again (~30 min);" \
             "MUTATION_RESUME has nothing to resume" >&2
    fi
    if [[ -d mutants ]]; then
        # mutmut refreshes the .py files of a kept mutants/ but not the others: a grammar.lark changed since (the IR
        # readers) left every test parsing the new syntax failing in the stats run, which stops the whole run.
        while IFS= read -r -d '' f; do
            cmp -s "$f" "mutants/$f" || { mkdir -p "mutants/$(dirname "$f")"; cp "$f" "mutants/$f"; }
        done < <(find nki_dsl hub_client kernels -type f ! -name '*.py' ! -name '*.pyc' -print0)
    fi
    globs=()
    for arg in "${packages[@]}"; do
        if [[ "$arg" == *@* ]]; then
            mapfile -t -O "${#globs[@]}" globs < <(grep -v '^[[:space:]]*$' "${arg#*@}")
            continue
        fi
        p="${arg%%=*}"
        n="${MUTATION_SAMPLE:-all}"
        [[ "$arg" != *=* ]] || n="${arg#*=}"
        if [[ "$n" == all ]]; then
            p="${p%/}"
            p="${p%.py}"
            globs+=("${p//\//.}.*")  # mutant names are module paths: nki_dsl.verify.rules.scope.x_check__mutmut_3
        else
            mapfile -t -O "${#globs[@]}" globs < <(.venv/bin/python scripts/mutation_report.py --sample "$n" "$p")
        fi
    done
    if [[ "${MUTATION_RESUME:-0}" == "1" ]]; then
        # mutmut re-runs every mutant named on its command line: name only those without a result yet.
        mapfile -t globs < <(.venv/bin/python scripts/mutation_report.py --pending "${globs[@]}")
        if [[ ${#globs[@]} -eq 0 ]]; then
            echo "MUTATION_RESUME=1: every selected mutant has a result already"
        fi
    fi
    timeout_cmd=()
    if [[ -n "${MUTATION_TIMEOUT:-}" ]]; then
        timeout_cmd=(timeout "$MUTATION_TIMEOUT")
    fi
    # mutmut exits non-zero when interrupted by the timeout; the figures of what ran are still worth printing.
    [[ ${#globs[@]} -eq 0 ]] || "${timeout_cmd[@]}" .venv/bin/mutmut run --max-children "${MUTATION_JOBS:-2}" "${globs[@]}" || true
fi

packages=("${packages[@]%%=*}")
.venv/bin/python scripts/mutation_report.py "${packages[@]%%@*}"
