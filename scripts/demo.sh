#!/usr/bin/env bash
# Install nki-dsl into .venv and run the main job: every tutorial, end to end (trace, verify, run against NumPy,
# profile on the modelled NeuronCore, publish to a local registry and load back).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/python -m tutorials
