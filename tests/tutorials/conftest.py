"""Every test here runs on each backend (``tests/backend_fixture.py``), but for those marked
``backend_independent``."""

import pytest

from tests.backend_fixture import BACKENDS, kernel_backend_for


@pytest.fixture(autouse=True, params=BACKENDS)
def kernel_backend(request, monkeypatch):
    return kernel_backend_for(request, monkeypatch)
