"""The SPMD grid over a device mesh, on 8 CPU host devices, in a fresh interpreter (``mesh_checks.py``): XLA_FLAGS
only takes effect before JAX creates its CPU client, which an earlier test here has already done."""

import os
import subprocess
import sys
from pathlib import Path

from tests.backends.jax import mesh_checks

ROOT = Path(__file__).resolve().parents[3]


def test_grid_kernels_on_an_8_device_mesh_match_one_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-m", "tests.backends.jax.mesh_checks"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [f"PASS {name}" for name in mesh_checks.CHECKS], run.stdout
