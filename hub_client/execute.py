"""Running verified kernel IR on a named nki_dsl backend, without the Python that traced it.

This is the only place hub_client runs kernels: the loader (IR specialisations), the trusted path (IR traced
from the published Python) and the bundle builder (test vectors, modelled benchmarks) all go through it, so
every path computes with the same executables. Only nki_dsl's public API is used (``nki.parse_ir`` gives a
``TracedKernel``; ``TracedKernel.compile`` an executable).
"""

from __future__ import annotations

import numpy as np

import nki_dsl as nki

DEFAULT_BACKEND = "numpy"  # the reference: what bundles are built and their test vectors made on


def available_backends() -> list[str]:
    return nki.backend_names()


def default_backend(arrays=()) -> str:
    """Where a call that names no backend runs: nki_dsl's default for these inputs (``nki.use_backend``,
    ``NKI_BACKEND``, JAX arrays in, else the NumPy reference)."""
    return nki.default_backend(*arrays)


def compile_ir(traced: nki.TracedKernel, backend: str, target: str | nki.Target):
    """An executable for a verified kernel; ``target`` reaches backends that model one (simulator)."""
    if backend not in nki.backend_names():
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(nki.backend_names())}")
    return traced.compile(backend=backend, target=target)


def parse_verified(text: str, target: str | nki.Target, budget: nki.IRBudget | None = None) -> nki.TracedKernel:
    """Parse and verify IR text (untrusted input) within ``budget`` (default: nki_dsl's); raises nki_dsl's parse
    or verification error."""
    return nki.parse_ir(text, target=target, budget=budget)


def parse_family(text: str, budget: nki.IRBudget | None = None) -> nki.ShapeFamily:
    """Parse a shape family's IR text (untrusted input) and check its form; each concrete shape is instantiated and
    verified within ``budget`` by ``family.instantiate``."""
    return nki.parse_family(text, budget=budget)


def param_names(traced: nki.TracedKernel) -> list[str]:
    return traced.param_names


def mismatch(traced: nki.TracedKernel, named: dict) -> str | None:
    """Why ``named`` (parameter name -> array, from a manifest's record or test vectors: untrusted) is not what the
    IR's parameters take (a name missing or extra, another shape or dtype), or None. A backend indexes its arrays
    as the IR says and does not check them."""
    params = traced.param_types
    names = [n for n, _, _ in params]
    if set(named) != set(names):
        return f"the IR's parameters are {', '.join(names)}; given {', '.join(named) or 'none'}"
    for name, shape, dtype in params:
        a = named[name]
        got = np.dtype(a.dtype).name
        if tuple(a.shape) != shape or got != dtype:
            return (f"parameter %{name} of the IR is {'x'.join(map(str, shape))}:{dtype}, given "
                    f"{'x'.join(map(str, a.shape))}:{got}")  # fmt: skip
    return None
