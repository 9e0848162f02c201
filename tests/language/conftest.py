"""Every test here runs on each backend (``tests/backend_fixture.py``); the JAX side is ``slow``."""

import pytest

from tests.backend_fixture import backend_params, use_backend


@pytest.fixture(autouse=True, params=backend_params(jax_slow=True))
def kernel_backend(request, monkeypatch):
    return use_backend(monkeypatch, request.param)
