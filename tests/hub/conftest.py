"""Fixtures for the Hub tests: a self-hosted registry on 127.0.0.1 (ephemeral port) in tmp_path, the HF cache in
tmp_path, and the HF_* environment pointing at them. Nothing here reaches beyond the loopback interface."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hub_client import api
from hub_client.bundle import build_bundle

ROOT = Path(__file__).parents[2]
SOFTMAX = ROOT / "kernels" / "softmax"
RMSNORM = ROOT / "kernels" / "rmsnorm"
TOKEN = "test-write-token"
TRUSTED_ORG = "trusted-org"  # the registry fixture's only trusted publisher


@pytest.fixture(autouse=True)
def hf_env(tmp_path, monkeypatch):
    """Every Hub test gets its own cache and no inherited HF settings."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT", "KERNELS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: a test that forgets the server fails
    api.clear_memo()  # loaded kernels are memoised per process; each test starts from a cold process state
    yield
    api.clear_memo()


class BackoffWaits:
    """Stands in for ``time`` in huggingface_hub's retry loop: the waits it asks for are recorded, not slept."""

    def __init__(self):
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture(autouse=True)
def hf_backoff(monkeypatch) -> BackoffWaits:
    """huggingface_hub retries a refused connection five times, sleeping 1, 2, 4, 8 and 8 s (``utils/_http.py``),
    and a transfer cut short five times, sleeping 1 s each (``file_download.http_get``): 23 s and 5 s of wall time
    per download that fails for good, and nothing of this project's runs meanwhile. The retries still happen, on
    the same requests; a test reads ``hf_backoff.waits`` to see them."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    waits = BackoffWaits()
    monkeypatch.setattr(_http, "time", waits)
    monkeypatch.setattr(file_download, "time", waits)
    return waits


@pytest.fixture
def registry(tmp_path, monkeypatch):
    from hub_client.server import serve
    from tests.hub_server.integrity import assert_fsck_clean

    with serve(tmp_path / "registry", tokens=[TOKEN], trusted_publishers=[TRUSTED_ORG]) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield server
    assert_fsck_clean(server.root)  # whatever the test did through the registry left every repo sound


@pytest.fixture(scope="session")
def softmax_bundle():
    return build_bundle(SOFTMAX, benchmarks=False)


@pytest.fixture(scope="session")
def softmax_bundles():
    """Two releases of major 1 of softmax."""
    return {v: build_bundle(SOFTMAX, v, benchmarks=False) for v in ("1.0.0", "1.1.0")}


def settings():
    from hub_client.settings import HubSettings

    return HubSettings.from_env()


def cache_dir() -> Path:
    return settings().cache_dir


def fetched_without_trust(bundle, repo_id: str):
    """``bundle`` published to the registry fixture as ``repo_id`` and fetched (major 1) with no trust: the kernel,
    checked to run its IR only (no published Python imported)."""
    import kernels
    from hub_client.publish import publish

    publish(bundle, repo_id, settings())
    k = kernels.get_kernel(repo_id, version=1)
    assert k.info.trusted is False and k.module is None
    return k
