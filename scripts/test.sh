#!/usr/bin/env bash
# Install nki-dsl with its test dependencies into .venv, lint, and run the default test suite.
# Slow tests are excluded by default; run them with: .venv/bin/python -m pytest -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,jax]'
.venv/bin/python -m ruff check .
.venv/bin/python -m pytest "$@"
