"""The HF_* environment, read at call time with huggingface_hub's meanings and precedence."""

from pathlib import Path

import pytest

from hub_client.settings import HubSettings


@pytest.fixture
def clean(monkeypatch):
    for var in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "KERNELS_CACHE", "XDG_CACHE_HOME", "HF_ENDPOINT",
                "HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_defaults(clean):
    s = HubSettings.from_env()
    assert s.endpoint == "https://huggingface.co" and s.token is None and not s.offline
    assert s.cache_dir == Path("~/.cache/huggingface/hub").expanduser()


def test_cache_precedence(clean, tmp_path):
    clean.setenv("HF_HOME", str(tmp_path / "home"))
    assert HubSettings.from_env().cache_dir == tmp_path / "home" / "hub"
    clean.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert HubSettings.from_env().cache_dir == tmp_path / "hub"
    clean.setenv("KERNELS_CACHE", str(tmp_path / "kernels"))  # HF kernels' own override wins, as there
    assert HubSettings.from_env().cache_dir == tmp_path / "kernels"
    assert HubSettings.from_env().repo_cache("acme/softmax") == tmp_path / "kernels" / "kernels--acme--softmax"


@pytest.mark.parametrize("value, offline", [("1", True), ("true", True), ("ON", True), ("0", False), ("", False)])
def test_offline_endpoint_and_token(clean, value, offline):
    clean.setenv("HF_HUB_OFFLINE", value)
    clean.setenv("HF_ENDPOINT", "http://127.0.0.1:8080/")
    clean.setenv("HF_TOKEN", "tok")
    s = HubSettings.from_env()
    assert (s.offline, s.endpoint, s.token) == (offline, "http://127.0.0.1:8080", "tok")
