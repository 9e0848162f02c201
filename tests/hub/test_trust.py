"""Trusted publishers: the registry's org overview (trustedKernelPublisher) and the caller's allow-list decide
whether published Python is imported; offline only a recorded "trusted" counts."""

import json

import numpy as np
import pytest

import kernels
from hub_client import api
from hub_client.publish import publish
from hub_client.publishers import RECORD
from tests.hub.conftest import TRUSTED_ORG, settings

ODD = np.ones((3, 5), np.float32)


@pytest.fixture
def published(registry, softmax_bundle):
    for repo in (f"{TRUSTED_ORG}/softmax", "acme/softmax"):
        publish(softmax_bundle, repo, settings())


def _runs_python(k) -> bool:
    """The published Python runs: its package imported, its softmax called. (No call of the entry point tells the
    two apart: every shape softmax's launcher takes also runs as IR, more rows than the families' in parts.)"""
    if k.module is None:
        return False
    np.testing.assert_allclose(k.module.softmax(ODD), np.full(ODD.shape, 0.2), rtol=1e-6)
    return True


def test_a_trusted_publishers_source_is_imported_without_trust_remote_code(published):
    k = kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    assert k.info.trusted and k.module is not None and k.info.trusted_by == f"trusted publisher {TRUSTED_ORG}"
    assert _runs_python(k) and "trusted publisher" in str(k.info)


def test_an_untrusted_publishers_source_is_not(published):
    k = kernels.get_kernel("acme/softmax", version=1)
    assert not k.info.trusted and k.module is None and not _runs_python(k)
    assert not (settings().repo_cache("acme/softmax") / "snapshots" / k.info.commit / "src").exists()  # not fetched


def test_the_callers_allow_list(published):
    k = kernels.get_kernel("acme/softmax", version=1, trust_remote_code=["acme/softmax"])
    assert k.info.trusted_by == "trust_remote_code" and _runs_python(k)
    assert not kernels.get_kernel("acme/softmax", version=1, trust_remote_code=["acme/other"]).info.trusted
    # The allow-list adds to the publisher rule, as in HF kernels; it does not revoke it.
    assert kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1, trust_remote_code=["acme/other"]).info.trusted


def test_an_unknown_org_is_not_trusted(registry):
    from hub_client import publishers

    # The overview of a namespace the registry does not know is a 404: an answer, "not trusted", with no warning.
    assert publishers.ask(settings(), "nobody/softmax") is False


def test_offline_uses_the_recorded_answer(published, monkeypatch):
    online = kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    kernels.get_kernel("acme/softmax", version=1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api.clear_memo()
    offline = kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    assert offline.info.trusted and offline.info.commit == online.info.commit and _runs_python(offline)
    assert not kernels.get_kernel("acme/softmax", version=1).info.trusted


def test_offline_without_a_record_is_not_trusted(published, monkeypatch):
    kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    (settings().repo_cache(f"{TRUSTED_ORG}/softmax") / RECORD).unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api.clear_memo()
    k = kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    assert not k.info.trusted and not _runs_python(k)


def test_a_record_from_another_endpoint_does_not_count(published, monkeypatch):
    kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1)
    record = settings().repo_cache(f"{TRUSTED_ORG}/softmax") / RECORD
    record.write_text(json.dumps({**json.loads(record.read_text()), "endpoint": "http://elsewhere"}))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api.clear_memo()
    assert not kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1).info.trusted


def test_a_revoked_publisher_is_noticed_online(published, registry, monkeypatch):
    assert kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1).info.trusted
    monkeypatch.setattr(registry.registry, "trusted_publishers", frozenset())
    api.clear_memo()
    assert not kernels.get_kernel(f"{TRUSTED_ORG}/softmax", version=1).info.trusted


def test_a_lock_load_offline_follows_the_record_kernels_download_wrote(published, tmp_path, monkeypatch):
    from hub_client.cli import main

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'[tool.kernels.dependencies]\n"{TRUSTED_ORG}/softmax" = 1\n')
    assert main(["lock", str(project)]) == 0 and main(["download", str(project)]) == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    k = kernels.load_kernel(f"{TRUSTED_ORG}/softmax", lockfile=project / "kernels.lock")
    assert k.info.trusted and _runs_python(k)
