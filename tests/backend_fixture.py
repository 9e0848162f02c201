"""Run a test body once per backend: the ``kernel_backend`` fixture.

Test directories whose tests run kernels the plain way (``kernel(x)``, ``kernel[grid](x)``, ``nki.simulate_kernel``)
use it autouse (their ``conftest.py``): under the ``jax`` parameter those calls run on the JAX backend, with the
same inputs and the same assertions (tests state their tolerances; where the JAX backend cannot give the reference's
numbers, e.g. dropout's random draws, the test says so and checks what holds on both).

Both sides run in the default suite: the JAX side adds about 80 s of CPU to the op-family directories (each test
compiles a fresh XLA program) and 50 s to the kernel library, NKI-style kernels and tutorials.

A test that never runs a kernel the plain way (it checks a refusal raised while tracing, a figure of the simulator,
a launcher that names its backend) would do the same thing twice: ``@backend_independent`` (below) runs it once.
Such a test is held to it: a plain call that traces and verifies (so that it would run on the backend) fails it,
naming the marker to remove.
"""

from __future__ import annotations

import pytest

from nki_dsl.targets import DEFAULT_TARGET, get_target
from nki_dsl.trace.jit import Launch

_PLAIN_CALL = Launch.__call__
MARK = "backend_independent"


def _calling_on(backend: str):
    def call(self, *args, backend: str = backend, **kwargs):
        return _PLAIN_CALL(self, *args, backend=backend, **kwargs)

    return call


def _refusing_plain_runs(self, *args, backend: str | None = None, target=DEFAULT_TARGET, **kwargs):
    if backend is not None:  # the test names the backend: the same call under every parameter
        return _PLAIN_CALL(self, *args, backend=backend, target=target, **kwargs)
    # Tracing and verifying do not depend on the backend: a refusal raised there is what the call does everywhere.
    self.jit.specialize(self.grid, args, kwargs, get_target(target))
    pytest.fail(f"{self!r} runs the plain way in a test marked {MARK}: remove the marker, so that the call runs on "
                f"every backend", pytrace=False)


BACKENDS = ("numpy", "jax")


def use_backend(monkeypatch, name: str) -> str:
    """Make plain kernel calls in this test run on backend ``name``."""
    if name != "numpy":
        monkeypatch.setattr(Launch, "__call__", _calling_on(name))
    return name


def backend_independent(test):
    """Decorator: run ``test`` on the NumPy reference alone (its ``kernel_backend`` parameter is ``numpy``) and
    hold it to never running a kernel the plain way."""
    once = pytest.mark.parametrize("kernel_backend", ["numpy"], indirect=True)
    return pytest.mark.backend_independent(once(test))


def kernel_backend_for(request, monkeypatch) -> str:
    """The body of the directories' ``kernel_backend`` fixture."""
    if request.node.get_closest_marker(MARK) is not None:
        monkeypatch.setattr(Launch, "__call__", _refusing_plain_runs)
        return request.param
    return use_backend(monkeypatch, request.param)
