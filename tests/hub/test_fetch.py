"""fetch: what a download and a warm load check, against the real registry: tokens for private repos, the receipt
(where it is, what it holds, when it counts), purging bad bytes, and `verify_cached` re-hashing everything."""

import json
import os

import numpy as np
import pytest

import kernels
from hub_client import api
from hub_client.fetch import fetch, purge, verify_cached
from hub_client.manifest import MANIFEST
from hub_client.publish import publish
from tests.hub.conftest import TOKEN, settings

X = np.ones((128, 512), np.float32)


@pytest.fixture
def loaded(registry, softmax_bundle):
    p = publish(softmax_bundle, "acme/softmax", settings())
    return p, kernels.get_kernel("acme/softmax", revision=p.commit)


def test_a_private_repo_downloads_with_the_token(registry, softmax_bundle, monkeypatch):
    p = publish(softmax_bundle, "acme/private", settings(), private=True)
    k = kernels.get_kernel("acme/private", version=1)
    assert k.info.commit == p.commit and k.softmax(X).shape == X.shape
    api.clear_memo()
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises((kernels.NotFoundError, kernels.AuthenticationError), match="acme/private"):
        kernels.get_kernel("acme/private", version=1)


def test_a_token_given_explicitly_is_the_one_downloads_use(registry, softmax_bundle, monkeypatch):
    from hub_client.settings import HubSettings

    p = publish(softmax_bundle, "acme/private", settings(), private=True)
    monkeypatch.delenv("HF_TOKEN")  # huggingface_hub would fall back to it: the explicit token must be passed on
    explicit = HubSettings.from_env(token=TOKEN)
    fetched = fetch(explicit, "acme/private", p.commit, lambda m: m.ir_files(), local_only=False)
    assert fetched.manifest.digest == p.digest


def test_the_receipt_records_size_and_mtime_of_each_verified_file(loaded, softmax_bundle):
    p, k = loaded
    receipt = json.loads((settings().repo_cache("acme/softmax") / "kernel-receipts" / f"{p.commit}.json").read_text())
    ir = softmax_bundle.manifest.ir_files()
    assert receipt["manifest"] == p.digest and sorted(receipt["files"]) == sorted(ir)
    for rel in ir:
        st = (k.info.path / rel).stat()
        assert receipt["files"][rel] == [st.st_size, st.st_mtime_ns]


def test_a_receipt_for_another_manifest_does_not_count(loaded):
    p, k = loaded
    path = settings().repo_cache("acme/softmax") / "kernel-receipts" / f"{p.commit}.json"
    receipt = json.loads(path.read_text())
    rel = next(iter(receipt["files"]))
    blob = (k.info.path / rel).resolve()
    blob.write_bytes(blob.read_bytes() + b"\n")  # tampered, and the receipt 'agrees' with the tampered file ...
    receipt["files"][rel] = [blob.stat().st_size, blob.stat().st_mtime_ns]
    path.write_text(json.dumps({**receipt, "manifest": "0" * 64}))  # ... but was written for another manifest
    api.clear_memo()
    with pytest.raises(kernels.DigestMismatchError, match=f"acme/softmax@{p.commit[:12]}: file {rel!r} has sha256"):
        kernels.get_kernel("acme/softmax", revision=p.commit)


@pytest.mark.parametrize("damage", ["{half", "[]", '{"manifest": "%s"}', '{"manifest": "%s", "files": []}',
                                    b"\xff\xfe"], ids=["not-json", "a-list", "no-files", "files-a-list", "not-utf8"])
def test_an_unusable_receipt_means_rehash_not_failure(loaded, monkeypatch, damage):
    from hub_client import fetch as fetch_module

    p, _ = loaded
    path = settings().repo_cache("acme/softmax") / "kernel-receipts" / f"{p.commit}.json"
    text = damage if isinstance(damage, bytes) else damage.replace("%s", p.digest).encode()
    path.write_bytes(text)
    hashed = []
    real = fetch_module._check
    monkeypatch.setattr(fetch_module, "_check", lambda path, rel, *a: (hashed.append(rel), real(path, rel, *a)))
    fetched = fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=True)
    assert fetched.manifest.digest == p.digest and sorted(hashed) == sorted(fetched.manifest.ir_files())
    assert json.loads(path.read_text())["manifest"] == p.digest  # rewritten whole


def test_only_a_first_use_touches_the_release_record(registry, softmax_bundle, monkeypatch):
    """The warm path reads the record and nothing more: no lock, no write, once a release is recorded."""
    from hub_client import releases

    calls = []
    real = releases.remember
    monkeypatch.setattr(releases, "remember", lambda *a: (calls.append(a[2]), real(*a)))
    p = publish(softmax_bundle, "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", version=1)
    assert calls == ["v1.0.0"]
    for call in (dict(version=1), dict(revision="v1.0.0"), dict(revision=p.commit), dict(revision="v1")):
        api.clear_memo()
        kernels.get_kernel("acme/softmax", **call)
        assert kernels.has_kernel("acme/softmax", **call)
    assert calls == ["v1.0.0"]


def test_fetch_reports_only_what_comes_from_the_network(loaded, softmax_bundle):
    p, _ = loaded
    seen = []
    everything = lambda m: sorted(m.files)  # noqa: E731
    fetch(settings(), "acme/softmax", p.commit, everything, local_only=False, progress=seen.append)
    assert sorted(seen) == sorted(set(softmax_bundle.files) - {MANIFEST} - set(softmax_bundle.manifest.ir_files()))
    seen.clear()
    fetch(settings(), "acme/softmax", p.commit, everything, local_only=False, progress=seen.append)
    assert seen == []


def test_verify_cached_rehashes_every_cached_file_and_names_a_bad_one(loaded, softmax_bundle):
    p, k = loaded
    manifest, checked = verify_cached(settings(), "acme/softmax", p.commit)
    assert manifest.digest == p.digest and checked == sorted(softmax_bundle.manifest.ir_files())
    rel = checked[-1]
    (k.info.path / rel).resolve().write_bytes(b"x")
    with pytest.raises(kernels.DigestMismatchError) as e:
        verify_cached(settings(), "acme/softmax", p.commit)
    assert str(e.value).startswith(f"acme/softmax@{p.commit[:12]} (cache): file {rel!r} has sha256 ")
    assert "the bad copy was removed from the cache" in str(e.value) and not (k.info.path / rel).exists()


def test_verify_cached_of_an_uncached_release(registry):
    with pytest.raises(kernels.OfflineError) as e:
        verify_cached(settings(), "acme/softmax", "c" * 40)
    assert str(e.value) == f"acme/softmax@{'c' * 12} is not in the cache at {settings().cache_dir}"


def test_purge_removes_the_entry_and_the_blob_it_links_to(tmp_path):
    blob = tmp_path / "blobs" / "b"
    blob.parent.mkdir()
    blob.write_bytes(b"bad")
    link = tmp_path / "snap" / "f"
    link.parent.mkdir()
    os.symlink(os.path.relpath(blob, link.parent), link)
    purge(link)
    assert not link.exists() and not link.is_symlink() and not blob.exists()
    plain = tmp_path / "plain"
    plain.write_bytes(b"bad")
    purge(plain)
    assert not plain.exists()
    purge(tmp_path / "never-there")  # nothing to remove is not an error (another process purged it first)
    purge(link)
    blob.write_bytes(b"bad")
    os.symlink(os.path.relpath(blob, link.parent), link)
    blob.unlink()  # a link whose blob another process already purged
    purge(link)
    assert not link.is_symlink()


def _lock(tmp_path, p):
    from hub_client.lockfile import Locked, write_lock

    path = tmp_path / "kernels.lock"
    write_lock(path, [Locked("acme/softmax", 1, p.commit, p.tag, p.digest)])
    return path


def test_download_failures_are_the_projects_errors(registry, softmax_bundle, tmp_path, monkeypatch, hf_backoff):
    """A lock pins the commit, so nothing asks for refs: these failures happen on the downloads themselves."""
    p = publish(softmax_bundle, "acme/softmax", settings())
    lock = _lock(tmp_path, p)
    monkeypatch.setenv("HF_TOKEN", "wrong")
    with pytest.raises(kernels.AuthenticationError) as e, pytest.warns(UserWarning, match="could not verify"):
        kernels.get_locked_kernel("acme/softmax", lockfile=lock)  # (and the publisher check could not be made)
    assert e.value.status == 401 and (e.value.repo_id, e.value.revision) == ("acme/softmax", p.commit)
    assert f"acme/softmax revision {p.commit} at {registry.url}: cannot download 'manifest.json'" in str(e.value)
    with pytest.raises(kernels.OfflineError) as e:
        kernels.load_kernel("acme/softmax", lockfile=lock)
    assert str(e.value) == (
        f"offline: acme/softmax@{p.commit[:12]} file 'manifest.json' is not in the cache at {settings().cache_dir}; "
        f"run the same call once online, or `nki-kernels download` a lock file that pins this release")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(kernels.DownloadError) as e:
        kernels.get_locked_kernel("acme/softmax", lockfile=lock)
    assert str(e.value) == (
        f"downloading 'manifest.json' of acme/softmax@{p.commit[:12]} from http://127.0.0.1:9 failed: the Hub does "
        f"not answer and the file is not cached; retry when the connection is back")
    assert hf_backoff.waits  # the error comes after huggingface_hub's retries, not instead of them


def test_a_file_the_manifest_names_missing_on_the_server(registry, softmax_bundle):
    from huggingface_hub import CommitOperationDelete, HfApi

    publish(softmax_bundle, "acme/softmax", settings())
    rel = softmax_bundle.manifest.ir_files()[0]
    head = HfApi(endpoint=registry.url, token=TOKEN).create_commit(
        "acme/softmax", [CommitOperationDelete(rel)], commit_message="lose a file", repo_type="kernel", revision="v1"
    ).oid  # fmt: skip
    with pytest.raises(kernels.NotFoundError) as e:
        kernels.get_kernel("acme/softmax", revision="v1")
    assert str(e.value) == (f"acme/softmax@{head[:12]} has no file {rel!r} (a manifest names it); the release is "
                            f"incomplete on {registry.url}, ask its publisher")  # fmt: skip


def test_fetch_refuses_an_unsafe_path_whoever_selects_it(loaded, tmp_path):
    p, _ = loaded
    with pytest.raises(kernels.UnsafePathError, match="'..'"):
        fetch(settings(), "acme/softmax", p.commit, lambda m: ["../../outside"], local_only=False)
    assert not (settings().repo_cache("acme/softmax") / "outside").exists()


def test_a_first_fetch_into_a_cache_that_does_not_exist_yet_creates_it(registry, softmax_bundle, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    """A fresh machine: the cache directory, the repo's folder in it and the download lock's folder are all made
    by the fetch; its lock is per commit in the repo's folder. The repo folder then holds huggingface_hub's layout,
    this project's receipts and the lock folder hidden (``.locks``, as huggingface_hub names its own), nothing else
    a cache scan would trip on."""
    from hub_client.settings import HubSettings

    p = publish(softmax_bundle, "acme/softmax", settings())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "fresh" / "hub"))
    fresh = HubSettings.from_env()
    assert not fresh.cache_dir.exists()
    elsewhere = tmp_path / "cwd"  # the lock, like every file of a fetch, lives in the cache, not where we run
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    fetched = fetch(fresh, "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=False)
    assert fetched.manifest.digest == p.digest
    assert list(elsewhere.iterdir()) == []
    assert (fresh.repo_cache("acme/softmax") / ".locks" / f"kernel-{p.commit}.lock").is_file()
    entries = sorted(e.name for e in fresh.repo_cache("acme/softmax").iterdir())
    assert ".locks" in entries and "kernel-receipts" in entries and "snapshots" in entries
    assert [e for e in entries if not e.startswith(".")] == sorted({"blobs", "kernel-receipts", "refs", "snapshots"}
                                                                   & set(entries))  # fmt: skip


def test_a_manifest_that_is_not_the_one_the_lock_pins_is_refused_naming_both_digests(registry, softmax_bundle):
    from hub_client.errors import DigestMismatchError

    p = publish(softmax_bundle, "acme/softmax", settings())
    pinned = "0" * 64
    with pytest.raises(DigestMismatchError) as e:
        fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=False, manifest_digest=pinned)
    assert (e.value.path, e.value.expected, e.value.actual) == (MANIFEST, pinned, p.digest)
    assert f"has sha256 {p.digest} but the manifest records {pinned}" in str(e.value)
    assert "(pinned by the lock file)" in str(e.value)
    assert not (settings().snapshot_dir("acme/softmax", p.commit) / MANIFEST).exists()


def test_a_damaged_cached_manifest_is_refused_and_removed_so_the_next_fetch_downloads_it_afresh(loaded):
    from hub_client.errors import BundleError

    p, _ = loaded
    cached = settings().snapshot_dir("acme/softmax", p.commit) / MANIFEST
    blob = cached.resolve()
    blob.write_text("{ not json")  # the bytes a full disk or a hand edit can leave
    with pytest.raises(BundleError):
        fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=True)
    assert not cached.exists() and not blob.exists()  # the bad root does not stick: link and blob are gone
    fetched = fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=False)
    assert fetched.manifest.digest == p.digest


def test_a_warm_fetch_of_verified_files_writes_nothing(loaded):
    # everything the receipt lists is untouched: the fetch trusts it and leaves the receipt as it was (a cache on
    # a read-only mount, or shared by several users, loads warm without write access)
    p, _ = loaded
    receipt = settings().repo_cache("acme/softmax") / "kernel-receipts" / f"{p.commit}.json"
    before = receipt.stat()
    fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=True)
    after = receipt.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_manifest_past_the_size_limit_is_refused_unread_and_removed(loaded, monkeypatch):
    from hub_client import fetch as fetch_module
    from hub_client.errors import BundleError
    from hub_client.manifest import parse

    p, _ = loaded
    cached = settings().snapshot_dir("acme/softmax", p.commit) / MANIFEST
    size = cached.stat().st_size
    monkeypatch.setattr(fetch_module, "MAX_MANIFEST_BYTES", size - 1)  # the real file is one byte too big
    read_bytes = type(cached).read_bytes
    monkeypatch.setattr(type(cached), "read_bytes", lambda self: pytest.fail(f"{self} read whole"))
    with pytest.raises(BundleError, match=f"manifest.json is {size:,} bytes, more than the {size - 1:,}"):
        fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=True)
    assert not cached.exists()  # a later fetch downloads it afresh
    monkeypatch.setattr(type(cached), "read_bytes", read_bytes)
    monkeypatch.setattr(fetch_module, "MAX_MANIFEST_BYTES", size)  # exactly at the limit: accepted
    fetched = fetch(settings(), "acme/softmax", p.commit, lambda m: m.ir_files(), local_only=False)
    assert fetched.manifest.digest == p.digest
    with pytest.raises(BundleError, match="more than the 16,777,216 a manifest may have"):
        parse(b" " * (16 << 20) + b"{}")  # checked before any JSON parsing
