"""Backends, found by name. Each backend module exposes ``compile_kernel(kernel, target) -> Executable`` (with
``run(arrays by parameter name)``) and ``emit_source(kernel, target) -> str``; ``target`` is a ``Target`` object
(resolved from a name once, by the API), which backends that model no hardware accept and ignore. Backends never
import each other, with one declared exception: the simulator computes its outputs with the NumPy reference
(``simulator/prepared.py``), the executable spec every backend answers to. ``tests/architecture/test_core_layers.py``
enforces both."""

from __future__ import annotations

import importlib
import importlib.util

from nki_dsl.errors import NkiApiError

_REGISTRY = {
    "numpy": "nki_dsl.backends.numpy_ref",
    "simulator": "nki_dsl.backends.simulator",  # outputs from the NumPy reference, timing in Executable.profile
    "jax": "nki_dsl.backends.jax",  # XLA-compiled; needs the optional extra nki-dsl[jax]
}
# The distribution a backend needs beyond nki-dsl's own dependencies, and the extra that installs it.
_EXTRAS = {"jax": ("jax", "nki-dsl[jax]")}


def load(name: str):
    module = _REGISTRY.get(name)
    if module is None:
        raise NkiApiError(f"unknown backend {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    extra = _EXTRAS.get(name)
    if extra is not None and importlib.util.find_spec(extra[0]) is None:
        raise NkiApiError(f"backend {name!r} needs {extra[0]}, which is not installed: pip install '{extra[1]}'")
    return importlib.import_module(module)


def names() -> list[str]:
    return sorted(_REGISTRY)
