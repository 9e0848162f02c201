"""Run a test body once per backend: the ``kernel_backend`` fixture.

Test directories whose tests run kernels the plain way (``kernel(x)``, ``kernel[grid](x)``, a library launcher, a
Hub entry point: any call that names no backend) use it autouse (their ``conftest.py``): it sets the project's
default backend (``NKI_BACKEND``, ``nki_dsl/backends/__init__.py``), so under the ``jax`` parameter those calls
run on the JAX backend, with the same inputs and the same assertions (tests state their tolerances; where the JAX
backend cannot give the reference's numbers, e.g. dropout's random draws, the test says so and checks what holds
on both).

Both sides run in the default suite: the JAX side adds about 80 s of CPU to the op-family directories (each test
compiles a fresh XLA program) and 50 s to the kernel library, NKI-style kernels and tutorials.

A test that never runs a kernel the plain way (it checks a refusal raised while tracing, a figure of the simulator,
a call that names its backend) would do the same thing twice: ``@backend_independent`` (below) runs it once.
Such a test is held to it: a call that traced and verified and then asks for the default backend (so that it
would run on the backend) fails it, naming the marker to remove.
"""

from __future__ import annotations

import pytest

from nki_dsl import backends

_RESOLVE = backends.resolve
MARK = "backend_independent"


def _refusing_defaults(backend: str | None, arrays=()) -> str:
    if backend is not None:  # the test names the backend: the same call under every parameter
        return _RESOLVE(backend, arrays)
    # Every caller resolves after tracing, verifying or parsing (trace/jit.py, traced.py, hub_client/entry.py): a
    # refusal raised there has already been raised, and is what the call does on every backend.
    pytest.fail(f"a kernel call that names no backend ran in a test marked {MARK}: remove the marker, so that the "
                f"call runs on every backend", pytrace=False)


BACKENDS = ("numpy", "jax")


def use_backend(monkeypatch, name: str) -> str:
    """Make the calls in this test that name no backend run on backend ``name`` (threads included)."""
    monkeypatch.setenv(backends.ENV, name)
    return name


def backend_independent(test):
    """Decorator: run ``test`` on the NumPy reference alone (its ``kernel_backend`` parameter is ``numpy``) and
    hold it to never running a kernel on the default backend."""
    once = pytest.mark.parametrize("kernel_backend", ["numpy"], indirect=True)
    return pytest.mark.backend_independent(once(test))


def slow_on_jax(test):
    """Decorator: ``test`` runs on both backends, its JAX run slow-marked (``pytest -m slow`` runs it). For tests
    whose kernels take XLA more than ~2 s to compile (several hundred unrolled ops: ViT-sized attention, fused
    LayerNorm + MLP over many row tiles): the NumPy run stays in the default suite, which stays within its time."""
    both = pytest.mark.parametrize("kernel_backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow)],
                                   indirect=True)  # fmt: skip
    return both(test)


def kernel_backend_for(request, monkeypatch) -> str:
    """The body of the directories' ``kernel_backend`` fixture."""
    if request.node.get_closest_marker(MARK) is not None:
        monkeypatch.setattr(backends, "resolve", _refusing_defaults)
        return request.param
    return use_backend(monkeypatch, request.param)
