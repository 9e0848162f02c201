"""The same calls as HF kernels 0.17.2: its signatures, ``version=N`` as the head of branch ``vN``, ``refs/heads``
revisions. (``tests/hub/test_hf_kernels.py`` compares the signatures with the installed HF package itself.)"""

import inspect

import numpy as np
import pytest
from huggingface_hub import CommitOperationAdd, HfApi

import kernels
from hub_client.publish import publish
from tests.hub.conftest import TOKEN, settings

# HF kernels 0.17.2's keyword parameters and defaults (inspect.signature on the installed package, hub.md 1.1).
HF_SIGNATURES = {
    "get_kernel": {"revision": None, "version": None, "backend": None, "user_agent": None,
                   "trust_remote_code": False, "check_arch": True},
    "has_kernel": {"revision": None, "version": None, "backend": None, "trust_remote_code": False,
                   "check_arch": True},
    "install_kernel": {"revision": None, "version": None, "backend": None, "local_files_only": False,
                       "user_agent": None, "trust_remote_code": False},
    "get_locked_kernel": {"lockfile": inspect.Parameter.empty, "trust_remote_code": False, "user_agent": None},
    "load_kernel": {"lockfile": inspect.Parameter.empty, "backend": None},
    "get_local_kernel": {"backend": None, "trust_remote_code": False, "user_agent": None},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HF_SIGNATURES))
def test_every_hf_keyword_is_accepted_with_hfs_default(name):
    params = inspect.signature(getattr(kernels, name)).parameters
    first = next(iter(params.values()))
    assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # repo_id (repo_path), positional as in HF
    for keyword, default in HF_SIGNATURES[name].items():
        assert params[keyword].kind is inspect.Parameter.KEYWORD_ONLY, (name, keyword)
        if default is not inspect.Parameter.empty:
            assert params[keyword].default == default, (name, keyword)


@pytest.fixture
def published(registry, softmax_bundles):
    return {v: publish(b, "acme/softmax", settings()) for v, b in softmax_bundles.items()}


def test_version_is_the_branch_head_and_the_newest_release(published):
    api = HfApi(endpoint=settings().endpoint, token=TOKEN)
    refs = api.list_repo_refs("acme/softmax", repo_type="kernel")
    head = next(b.target_commit for b in refs.branches if b.name == "v1")
    newest = next(t.target_commit for t in refs.tags if t.name == "v1.1.0")
    k = kernels.get_kernel("acme/softmax", version=1, user_agent={"app": "test"}, check_arch=False, backend="cpu")
    assert k.info.commit == head == newest == published["1.1.0"].commit  # linear publishes: the two agree
    assert k.info.version == "1.1.0"
    assert kernels.get_kernel("acme/softmax", revision="refs/heads/v1").info.commit == head  # what HF passes back
    assert kernels.get_kernel("acme/softmax", revision="refs/tags/v1.0.0").info.commit == published["1.0.0"].commit
    path = kernels.install_kernel("acme/softmax", version=1)
    assert path == settings().snapshot_dir("acme/softmax", head) and (path / "manifest.json").is_file()
    assert (path / "build" / "torch-neuron").is_dir() is False  # only what a load needs is fetched here


def test_an_untagged_branch_head_is_loaded_as_hf_does_and_said(published):
    api = HfApi(endpoint=settings().endpoint, token=TOKEN)
    # A commit on v1 that no publish tagged (a publish stopped between commit and tag): same bundle, one extra file.
    info = api.create_commit("acme/softmax", [CommitOperationAdd("NOTES.md", b"notes\n")], repo_type="kernel",
                             revision="v1", commit_message="untagged")  # fmt: skip
    with pytest.warns(UserWarning, match=r"v1 head .* is not a tagged release .* The newest release is v1.1.0"):
        k = kernels.get_kernel("acme/softmax", version=1)
    assert k.info.commit == info.oid and k.info.version == "1.1.0"  # the manifest is v1.1.0's, the commit new
    x = np.ones((128, 512), np.float32)
    np.testing.assert_allclose(k.softmax(x), np.full_like(x, 1 / 512), rtol=1e-6)


def test_user_agent_reaches_the_hub_requests(published, monkeypatch):
    import huggingface_hub

    from hub_client import api

    seen = []
    original = huggingface_hub.hf_hub_download

    def recording(*args, **kwargs):
        seen.append(kwargs.get("user_agent"))
        return original(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", recording)
    api.clear_memo()
    kernels.get_kernel("acme/softmax", version=1, user_agent={"app": "demo/1"})
    assert seen and all(ua == {"app": "demo/1"} for ua in seen)  # every file download carries it
    assert api._settings({"app": "demo/1"}).api().user_agent == {"app": "demo/1"}  # and the refs/trust calls
    with pytest.raises(TypeError, match="user_agent must be a string or a dict"):
        kernels.get_kernel("acme/softmax", version=1, user_agent=1)
