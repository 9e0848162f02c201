"""Run a test body once per backend: the ``kernel_backend`` fixture.

Test directories whose tests run kernels the plain way (``kernel(x)``, ``kernel[grid](x)``, ``nki.simulate_kernel``)
use it autouse (their ``conftest.py``): under the ``jax`` parameter those calls run on the JAX backend, with the
same inputs and the same assertions (tests state their tolerances; where the JAX backend cannot give the reference's
numbers, e.g. dropout's random draws, the test says so and checks what holds on both).

Both sides run in the default suite: the JAX side adds about 80 s of CPU to the op-family directories (each test
compiles a fresh XLA program) and 50 s to the kernel library, NKI-style kernels and tutorials.
"""

from __future__ import annotations

from nki_dsl.trace.jit import Launch

_PLAIN_CALL = Launch.__call__


def _calling_on(backend: str):
    def call(self, *args, backend: str = backend, **kwargs):
        return _PLAIN_CALL(self, *args, backend=backend, **kwargs)

    return call


BACKENDS = ("numpy", "jax")


def use_backend(monkeypatch, name: str) -> str:
    """Make plain kernel calls in this test run on backend ``name``."""
    if name != "numpy":
        monkeypatch.setattr(Launch, "__call__", _calling_on(name))
    return name
