#!/usr/bin/env bash
# Install nki-dsl with its test dependencies into .venv, lint, and run the default test suite.
# Slow tests are excluded by default; run them with: .venv/bin/python -m pytest -m slow
# Property tests draw their whole example counts with: .venv/bin/python -m pytest --hypothesis-profile deep
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,jax,mutation]'  # mutation: tests/test_mutation_report.py reads mutmut's own config fingerprint
.venv/bin/python -m ruff check .
# Two worker processes (NKI_TEST_WORKERS=0 runs in this process): the suite is CPU-bound and CI has two cores. Each
# test file stays in one worker (--dist loadfile), so module-scoped fixtures and a file's test order are as in a
# serial run; every test gets its own tmp_path, and servers listen on ephemeral ports, so the workers share nothing.
.venv/bin/python -m pytest -n "${NKI_TEST_WORKERS:-2}" --dist loadfile "$@"
