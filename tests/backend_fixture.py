"""Run a test body once per backend: the ``kernel_backend`` fixture.

Test directories whose tests run kernels the plain way (``kernel(x)``, ``kernel[grid](x)``, ``nki.simulate_kernel``)
use it autouse (their ``conftest.py``): under the ``jax`` parameter those calls run on the JAX backend, with the
same inputs and the same assertions (tests state their tolerances; where the JAX backend cannot give the reference's
numbers, e.g. dropout's random draws, the test says so and checks what holds on both).

The JAX side of the op-family directories is ``slow`` (``pytest -m slow``): every test there compiles a fresh XLA
program, which would double the default run. The default run keeps the JAX side of the kernel library, the
NKI-style kernels, the tutorials and ``tests/backends/jax``, which between them reach every op family.
"""

from __future__ import annotations

import pytest

from nki_dsl.trace.jit import Launch

_PLAIN_CALL = Launch.__call__


def _calling_on(backend: str):
    def call(self, *args, backend: str = backend, **kwargs):
        return _PLAIN_CALL(self, *args, backend=backend, **kwargs)

    return call


def backend_params(jax_slow: bool):
    """The fixture's parameters: numpy always, jax (marked slow when ``jax_slow``)."""
    return ["numpy", pytest.param("jax", marks=[pytest.mark.slow] if jax_slow else [])]


def use_backend(monkeypatch, name: str) -> str:
    """Make plain kernel calls in this test run on backend ``name``."""
    if name != "numpy":
        monkeypatch.setattr(Launch, "__call__", _calling_on(name))
    return name
