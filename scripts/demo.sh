#!/usr/bin/env bash
# Install nki-dsl into .venv and run the main job: every tutorial, end to end (trace, verify, run against NumPy,
# profile on the modelled NeuronCore, publish to a local registry and load back), ending with lesson 6: the
# vit-attn kernel fetched from a Hub by version, checked against NumPy, and its modelled speed-up over eager
# attention; then the headline row of benchmarks/vit.py (ViT-B/16, batch 8, bf16, trn2).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/python -m tutorials
echo
echo "=== the headline: vit-attn vs eager attention (python benchmarks/vit.py for every model, batch and target)"
.venv/bin/python benchmarks/vit.py --quick
