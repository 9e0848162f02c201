"""Every test here runs on each backend (``tests/backend_fixture.py``)."""

import pytest

from tests.backend_fixture import BACKENDS, use_backend


@pytest.fixture(autouse=True, params=BACKENDS)
def kernel_backend(request, monkeypatch):
    return use_backend(monkeypatch, request.param)
