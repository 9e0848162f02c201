"""Running verified kernel IR on a named nki_dsl backend, without the Python that traced it.

This is the only place hub_client touches the backend registry: the loader (IR specialisations), the trusted
path (IR traced from the published Python) and the bundle builder (test vectors, modelled benchmarks) all run
kernels through it, so every path computes with the same executables.
"""

from __future__ import annotations

import inspect

import nki_dsl as nki
from nki_dsl import backends

DEFAULT_BACKEND = "numpy"


def available_backends() -> list[str]:
    return backends.names()


def compile_ir(ir, backend: str, target: str):
    """An executable for ``ir`` (a verified kernel IR); ``target`` reaches backends that model one (simulator)."""
    if backend not in backends.names():
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(backends.names())}")
    module = backends.load(backend)
    if "target" in inspect.signature(module.compile_kernel).parameters:
        return module.compile_kernel(ir, target=target)
    return module.compile_kernel(ir)


def parse_verified(text: str, target: str):
    """Parse and verify IR text (untrusted input); raises nki_dsl's parse or verification error."""
    return nki.parse_ir(text, target=target).ir


def param_names(ir) -> list[str]:
    return [p.name for p in ir.params]
