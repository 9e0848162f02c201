"""Test-level entry to the simulator (until ``nki.simulate`` is wired): trace a kernel for arrays or
``nki.spec`` shapes and simulate it. With arrays the outputs come back too (numbers-and-timing mode)."""

from __future__ import annotations

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

# The calibration micro-kernels are defined once, beside the fidelity table that documents them.
from benchmarks.fidelity import load_store, resident_matmuls  # noqa: F401 - re-exported for the simulator tests
from nki_dsl.backends.simulator import simulate as _simulate
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import as_launch


def simulate(kernel, *args, target="trn2", **kwargs):
    launch, target = as_launch(kernel), get_target(target)
    ir, arrays, _ = launch.jit.specialize(launch.grid, args, kwargs, target)
    numbers = arrays if arrays and len(arrays) == sum(isinstance(a, np.ndarray) for a in args) else None
    return _simulate(ir, numbers, target)


def specialized(kernel, *args, target="trn2", **kwargs):
    """The traced IR ``simulate`` runs for these arguments (the jit cache's object, so ``prepare`` finds it)."""
    launch = as_launch(kernel)
    return launch.jit.specialize(launch.grid, args, kwargs, get_target(target))[0]


def trace(kernel, *args, target="trn2"):
    return nki.trace(kernel, *args, target=target).ir


@nki.jit
def one_matmul(a, b):
    """One nc_matmul of [K=128, M=128] (stationary) by [128, N=512] (moving)."""
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.load(a)
    mv = nl.load(b)
    res = nisa.nc_matmul(st, mv)
    nl.store(out, value=nl.copy(res))
    return out




@nki.jit
def tiled_add(x, y):
    """out = x + y in [128, F] row tiles."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(rows // 128):
        a = nl.load(x[t * 128:(t + 1) * 128, :])
        b = nl.load(y[t * 128:(t + 1) * 128, :])
        nl.store(out[t * 128:(t + 1) * 128, :], value=nl.add(a, b))
    return out
