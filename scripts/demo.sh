#!/usr/bin/env bash
# Install nki-dsl into .venv and run the main job: trace, print, run and check the tutorial kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/python -m tutorials
