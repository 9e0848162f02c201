"""get_kernel against the self-hosted registry: versions, revisions, offline use, unknown names, tampering."""

import hashlib

import numpy as np
import pytest
from huggingface_hub import CommitOperationAdd, HfApi

import kernels
from hub_client.publish import publish
from tests.hub.conftest import TOKEN, cache_dir, settings


@pytest.fixture
def published(registry, softmax_bundles):
    return {v: publish(b, "acme/softmax", settings()) for v, b in softmax_bundles.items()}


def _cached_digests() -> set[str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in cache_dir().rglob("*") if p.is_file()}


def test_version_resolves_to_the_newest_release(published):
    k = kernels.get_kernel("acme/softmax", version=1)
    assert (k.info.version, k.info.revision, k.info.commit) == ("1.1.0", "v1.1.0", published["1.1.0"].commit)
    assert k.info.digest == published["1.1.0"].digest
    x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(k.softmax(x), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("revision", ["v1.0.0", "v1", "commit"])
def test_revision_is_a_tag_branch_or_commit(published, revision):
    commit = published["1.0.0"].commit
    k = kernels.get_kernel("acme/softmax", revision=commit if revision == "commit" else revision)
    expected = published["1.1.0"].commit if revision == "v1" else commit
    assert k.info.commit == expected


def test_version_and_revision_are_exclusive(published):
    with pytest.raises(ValueError, match="exactly one"):
        kernels.get_kernel("acme/softmax")
    with pytest.raises(ValueError, match="exactly one"):
        kernels.get_kernel("acme/softmax", version=1, revision="v1")


def test_unknown_names_list_what_exists(published):
    with pytest.raises(kernels.NotFoundError, match="acme/nope"):
        kernels.get_kernel("acme/nope", version=1)
    with pytest.raises(kernels.NotFoundError) as e:
        kernels.get_kernel("acme/softmax", version=3)
    assert "v1.0.0" in str(e.value) and "v1.1.0" in str(e.value) and "v1" in str(e.value)
    with pytest.raises(kernels.NotFoundError, match="v1.1.0"):
        kernels.get_kernel("acme/softmax", revision="v9.9.9")
    assert kernels.has_kernel("acme/softmax", version=1)
    assert not kernels.has_kernel("acme/softmax", version=2)


def test_offline_with_nothing_cached_says_so(published, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(kernels.OfflineError, match="offline.*not in the cache"):
        kernels.get_kernel("acme/softmax", version=1)


def test_online_then_offline_same_call(published, monkeypatch):
    online = kernels.get_kernel("acme/softmax", version=1, trust_remote_code=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # and nothing listens there either
    offline = kernels.get_kernel("acme/softmax", version=1, trust_remote_code=True)
    assert offline.info.commit == online.info.commit
    x = np.ones((3, 5), np.float32)  # no specialisation: the trusted Python runs, from the cache
    np.testing.assert_allclose(offline.softmax(x), np.full((3, 5), 0.2), rtol=1e-6)


def test_tampered_file_on_the_server(published, registry, softmax_bundles):
    """A commit that changes an IR file behind the manifest's back: refused, nothing kept, fixed retry works."""
    bundle = softmax_bundles["1.1.0"]
    rel = bundle.manifest.ir_files()[0]
    good = bundle.files[rel]
    evil = good.replace(b"nl.exp", b"nl.log")
    api = HfApi(endpoint=registry.url, token=TOKEN)
    api.create_commit("acme/softmax", [CommitOperationAdd(rel, evil)], commit_message="tamper", repo_type="kernel",
                      revision="v1")  # fmt: skip
    with pytest.raises(kernels.DigestMismatchError) as e:
        kernels.get_kernel("acme/softmax", revision="v1")
    msg = str(e.value)
    assert rel in msg and bundle.manifest.files[rel] in msg and hashlib.sha256(evil).hexdigest() in msg
    assert hashlib.sha256(evil).hexdigest() not in _cached_digests()
    api.create_commit("acme/softmax", [CommitOperationAdd(rel, good)], commit_message="fix", repo_type="kernel",
                      revision="v1")  # fmt: skip
    k = kernels.get_kernel("acme/softmax", revision="v1")
    assert k.softmax(np.ones((128, 512), np.float32)).shape == (128, 512)


def test_tampered_cache_is_caught_by_verify(published, capsys):
    from hub_client.cli import main

    k = kernels.get_kernel("acme/softmax", version=1)
    assert main(["verify", "acme/softmax", "--version", "1"]) == 0
    ir = next((k.info.path / "ir").rglob("*.nkir"))
    ir.resolve().write_bytes(b"tampered")
    assert main(["verify", "acme/softmax", "--version", "1"]) == 1
    assert "tampered" not in {p.read_text(errors="replace") for p in cache_dir().rglob("*.nkir") if p.exists()}
    assert "sha256" in capsys.readouterr().err
