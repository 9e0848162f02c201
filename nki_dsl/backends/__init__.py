"""Backends, found by name. Each backend module exposes ``compile_kernel(kernel, target) -> Executable`` (with
``run(arrays by parameter name)``) and ``emit_source(kernel, target) -> str``; ``target`` is a ``Target`` object
(resolved from a name once, by the API), which backends that model no hardware accept and ignore. Backends never
import each other, with one declared exception: the simulator computes its outputs with the NumPy reference
(``simulator/prepared.py``), the executable spec every backend answers to. ``tests/architecture/test_core_layers.py``
enforces both.

The default backend, for a call that names none (``kernel(x)``, ``TracedKernel.compile()``, a library launcher, a
Hub entry point, ``nki run``), is decided here once for all of them (``resolve``), first match wins:

1. ``with nki.use_backend("jax"):`` around the call (this thread or asyncio task only: a context variable);
2. the ``NKI_BACKEND`` environment variable (the whole process and its subprocesses; read at each call);
3. ``jax`` when an input is a JAX array (a ``jax.Array``, including a tracer inside ``jax.jit``/``vmap``/``grad``):
   the call is part of a JAX program, so it runs where that program runs and returns JAX arrays; NumPy could not
   take a tracer at all;
4. ``numpy``, the reference.

An explicit ``backend=`` always wins over all of these."""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import os
import sys

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


ENV = "NKI_BACKEND"
REFERENCE = "numpy"
_CHOSEN: contextvars.ContextVar[str | None] = contextvars.ContextVar("nki_dsl_backend", default=None)


def _known(name, where: str) -> str:
    if name not in _REGISTRY:
        raise NkiApiError(f"{where}={name!r} names no backend; available: {', '.join(sorted(_REGISTRY))}")
    return name


@contextlib.contextmanager
def use_backend(name: str):
    """Run the calls inside the ``with`` block that name no backend on ``name``."""
    token = _CHOSEN.set(_known(name, "use_backend"))
    try:
        yield name
    finally:
        _CHOSEN.reset(token)


def _holds_jax(arrays) -> bool:
    jax = sys.modules.get("jax")  # not imported: no argument can be a JAX array, and importing it costs ~1 s
    return jax is not None and any(isinstance(a, jax.Array) for a in arrays)


def resolve(backend: str | None, arrays=()) -> str:
    """The backend a call runs on: ``backend`` when named, else the default for a call on ``arrays`` (above)."""
    if backend is not None:
        return backend
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    env = os.environ.get(ENV, "").strip()
    if env:
        return _known(env, ENV)
    return "jax" if _holds_jax(arrays) else REFERENCE
