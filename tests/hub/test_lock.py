"""kernels.lock: lock a project's dependencies, pre-fetch them, load them pinned, and offline from the cache."""

import io
import json
import re

import numpy as np
import pytest

import kernels
from hub_client import api
from hub_client.cli import main
from hub_client.lockfile import Locked, digests_path, read_lock, write_lock
from hub_client.publish import publish
from tests.hub.conftest import settings
from tests.hub.ids import spelled


@pytest.fixture
def project(tmp_path, registry, softmax_bundles):
    for bundle in softmax_bundles.values():
        publish(bundle, "acme/softmax", settings())
    d = tmp_path / "project"
    d.mkdir()
    (d / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool.kernels.dependencies]\n"acme/softmax" = 1\n')
    return d


def test_lock_pins_the_newest_release_commit_and_digest(project, softmax_bundles, capsys):
    assert main(["lock", str(project)]) == 0
    data = json.loads((project / "kernels.lock").read_text())
    assert data[0]["dependency"] == {"repo-id": "acme/softmax", "version": 1}
    assert set(data[0]["lock"]) == {"commit"}  # HF's strict parser refuses any other field
    entry = read_lock(project / "kernels.lock")["acme/softmax"]
    assert entry.tag == "v1.1.0" and entry.digest == softmax_bundles["1.1.0"].manifest.digest
    assert "v1.1.0" in capsys.readouterr().out


def test_download_then_load_offline(project, monkeypatch):
    assert main(["lock", str(project)]) == 0
    assert main(["download", str(project)]) == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    k = kernels.load_kernel("acme/softmax", lockfile=project / "kernels.lock")
    assert k.info.version == "1.1.0"
    assert k.softmax(np.ones((128, 512), np.float32)).shape == (128, 512)


def test_download_progress_names_the_file_being_fetched(project, softmax_bundles, monkeypatch):
    from rich.console import Console

    from hub_client import cli

    shown = io.StringIO()  # a terminal, so that the progress bar draws (transient: erased when done)
    monkeypatch.setattr(cli, "console", Console(file=shown, force_terminal=True, color_system=None, width=300))
    assert main(["lock", str(project)]) == 0 and main(["download", str(project)]) == 0
    named = set(re.findall(r"downloading (\S+)", shown.getvalue()))
    assert named & set(softmax_bundles["1.1.0"].files), named  # files of the locked release, by their path


def test_download_says_how_many_files_it_verified(project, softmax_bundles, capsys):
    assert main(["lock", str(project)]) == 0 and main(["download", str(project)]) == 0
    release = softmax_bundles["1.1.0"].files  # every file the manifest digests, and the manifest itself
    assert f"acme/softmax: {len(release)} files verified in " in capsys.readouterr().out


def test_locked_digest_mismatch_is_refused(project):
    assert main(["lock", str(project)]) == 0
    path = project / "kernels.lock"
    sidecar = digests_path(path)
    data = json.loads(sidecar.read_text())
    data["locks"]["acme/softmax"]["manifest-sha256"] = "0" * 64
    sidecar.write_text(json.dumps(data))
    with pytest.raises(kernels.DigestMismatchError, match="manifest.json"):
        kernels.get_locked_kernel("acme/softmax", lockfile=path)


def test_unlocked_repo_and_missing_lock(project):
    with pytest.raises(kernels.LockError, match="kernels lock"):
        kernels.get_locked_kernel("acme/softmax", lockfile=project / "kernels.lock")
    assert main(["lock", str(project)]) == 0
    with pytest.raises(kernels.LockError, match="acme/softmax"):
        kernels.get_locked_kernel("acme/other", lockfile=project / "kernels.lock")


def test_load_kernel_never_downloads(project):
    assert main(["lock", str(project)]) == 0  # resolves and fetches only manifest.json
    with pytest.raises(kernels.OfflineError):
        kernels.load_kernel("acme/softmax", lockfile=project / "kernels.lock")


def test_offline_after_download_every_call_the_lock_covers_works(project, softmax_bundles, monkeypatch, capsys):
    assert main(["lock", str(project)]) == 0 and main(["download", str(project)]) == 0
    locked = read_lock(project / "kernels.lock")["acme/softmax"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    x = np.ones((128, 512), np.float32)
    for k in (kernels.get_kernel("acme/softmax", version=1),
              kernels.get_kernel("acme/softmax", revision="v1.1.0"),
              kernels.get_kernel("acme/softmax", revision=locked.commit),
              kernels.get_kernel("acme/softmax", version=1, trust_remote_code=True),
              kernels.get_locked_kernel("acme/softmax", lockfile=project / "kernels.lock")):  # fmt: skip
        assert (k.info.commit, k.info.digest) == (locked.commit, locked.digest)
        assert k.softmax(x).shape == x.shape
    assert kernels.has_kernel("acme/softmax", version=1)
    capsys.readouterr()
    assert main(["verify", "acme/softmax", "--version", "1"]) == 0
    assert main(["verify", "acme/softmax", "--version", "1", "--run"]) == 0
    assert main(["verify", "acme/softmax", "--revision", "v1.1.0"]) == 0
    assert f"acme/softmax v1.1.0 commit {locked.commit}" in capsys.readouterr().out
    with pytest.raises(kernels.OfflineError):  # what the lock does not cover is still refused as not cached
        kernels.get_kernel("acme/softmax", version=2)


def test_download_does_not_roll_back_a_newer_resolution(project, softmax_bundles, monkeypatch):
    """A lock of an older release downloaded after an online call saw a newer one: version=1 stays the newer."""
    newer = kernels.get_kernel("acme/softmax", version=1)
    assert newer.info.version == "1.1.0"
    old = kernels.get_kernel("acme/softmax", revision="v1.0.0")
    write_lock(project / "kernels.lock", [Locked("acme/softmax", 1, old.info.commit, "v1.0.0", old.info.digest)])
    assert main(["download", str(project)]) == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api.clear_memo()
    assert kernels.get_kernel("acme/softmax", version=1).info.commit == newer.info.commit
    assert kernels.get_kernel("acme/softmax", revision="v1.0.0").info.commit == old.info.commit


def test_download_records_the_lock_as_the_first_use_of_its_release(project, monkeypatch):
    from hub_client import releases

    assert main(["lock", str(project)]) == 0
    cache = settings().repo_cache("acme/softmax")
    (cache / releases.RECORD).unlink()  # another machine: the lock file is all it has seen of the release
    assert main(["download", str(project)]) == 0
    locked = read_lock(project / "kernels.lock")["acme/softmax"]
    assert releases.recorded(settings(), "acme/softmax") == {"v1.1.0": {"commit": locked.commit,
                                                                       "digest": locked.digest}}  # fmt: skip


@pytest.mark.parametrize("digest", ["sha512:" + "a" * 128, "sha512:" + "a" * 57, "sha256:" + "a" * 63,
                                    "sha256:" + "a" * 65, "sha256:" + "A" * 64, "a" * 64, "sha256-" + "a" * 64,
                                    "sha256:" + "a" * 64 + "\n", "SHA256:" + "a" * 64])  # fmt: skip
def test_a_lock_digest_other_than_sha256_hex_is_refused(tmp_path, digest):
    path = tmp_path / "kernels.lock"
    entry = {"dependency": {"repo-id": "acme/softmax", "version": 1},
             "lock": {"commit": "c" * 40, "tag": "v1.0.0", "digest": digest}}  # fmt: skip
    path.write_text(json.dumps([entry]))
    with pytest.raises(kernels.LockError, match="digest must be sha256:<64 hex>"):
        read_lock(path)
    entry["lock"]["digest"] = "sha256:" + "a" * 64
    path.write_text(json.dumps([entry]))
    assert read_lock(path)["acme/softmax"].digest == "a" * 64  # the prefix is removed, the hex kept whole


@pytest.mark.parametrize("commit", ["c" * 40 + "\n", "c" * 39, "C" * 40, "g" * 40, "c" * 41], ids=spelled)
def test_a_lock_commit_other_than_40_hex_is_refused(tmp_path, commit):
    path = tmp_path / "kernels.lock"
    entry = {"dependency": {"repo-id": "acme/softmax", "version": 1},
             "lock": {"commit": commit, "tag": "v1.0.0", "digest": "sha256:" + "a" * 64}}  # fmt: skip
    path.write_text(json.dumps([entry]))
    with pytest.raises(kernels.LockError, match="commit must be 40 hex"):
        read_lock(path)
