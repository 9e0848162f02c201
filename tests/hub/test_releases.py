"""Trust on first use of releases: a tag rewritten on the server after this cache first fetched it is refused with
both values; a lock file or a commit pin still loads what it names; `kernels forget` accepts a re-release.

The rewrite is done the way an attacker (or a careless admin) with access to the registry's disk would: a new
commit whose manifest and files are consistent (every digest recomputed), then the tag's git ref moved onto it.
"""

import json
import re
import subprocess
import threading

import numpy as np
import pytest
from huggingface_hub import CommitOperationAdd, HfApi

import kernels
from hub_client import api, releases
from hub_client.bundle import Bundle
from hub_client.cli import main
from hub_client.lockfile import Locked, write_lock
from hub_client.manifest import MANIFEST, dump, sha256_hex
from hub_client.publish import publish
from tests.hub.conftest import TOKEN, settings

X = np.ones((128, 512), np.float32)


def _rewritten(bundle: Bundle) -> Bundle:
    """The same release with its first IR file changed and every digest recomputed: consistent, and different."""
    files = dict(bundle.files)
    rel = bundle.manifest.ir_files()[0]
    files[rel] = files[rel].replace(b"nl.exp", b"nl.log")
    raw = json.loads(files[MANIFEST])
    raw["files"][rel] = sha256_hex(files[rel])
    files[MANIFEST] = dump(raw)
    return Bundle(files)


def _rewrite_release(registry, bundle: Bundle, tag: str = "v1.0.0") -> str:
    """Commit the rewritten bundle on v1 and move the tag onto it in the registry's git directory; the new commit."""
    evil = _rewritten(bundle)
    hf = HfApi(endpoint=registry.url, token=TOKEN)
    ops = [CommitOperationAdd(p, data) for p, data in sorted(evil.files.items())]
    commit = hf.create_commit("acme/softmax", ops, commit_message="rewrite", repo_type="kernel", revision="v1").oid
    git_dir = registry.root / "kernels" / "acme" / "softmax"
    subprocess.run(["git", f"--git-dir={git_dir}", "update-ref", f"refs/tags/{tag}", commit], check=True)
    return commit


@pytest.fixture
def first_fetched(registry, softmax_bundle):
    done = publish(softmax_bundle, "acme/softmax", settings())
    k = kernels.get_kernel("acme/softmax", version=1)
    assert k.info.commit == done.commit
    api.clear_memo()  # a later process: nothing in memory, the cache and its records warm
    return done


def test_first_fetch_records_tag_commit_and_manifest_digest(first_fetched):
    assert releases.recorded(settings(), "acme/softmax") == {
        "v1.0.0": {"commit": first_fetched.commit, "digest": first_fetched.digest}
    }


def test_a_release_rewritten_on_the_server_is_refused_with_both_values(first_fetched, registry, softmax_bundle):
    new = _rewrite_release(registry, softmax_bundle)
    new_digest = _rewritten(softmax_bundle).manifest.digest
    for call in (lambda: kernels.get_kernel("acme/softmax", version=1),
                 lambda: kernels.get_kernel("acme/softmax", revision="v1.0.0"),
                 lambda: kernels.has_kernel("acme/softmax", version=1)):  # fmt: skip
        with pytest.raises(kernels.ReleaseChangedError) as e:
            call()
        msg = str(e.value)
        assert first_fetched.commit in msg and first_fetched.digest in msg and new in msg and new_digest in msg
        assert "kernels forget acme/softmax v1.0.0" in msg and f"revision={first_fetched.commit!r}" in msg
        assert e.value.recorded == {"commit": first_fetched.commit, "digest": first_fetched.digest}
        assert e.value.found == {"commit": new, "digest": new_digest}
    # Nothing of the rewritten release but its manifest was fetched, and the record still names the first one.
    fetched = {p.name for p in (settings().snapshot_dir("acme/softmax", new)).rglob("*") if p.is_file()}
    assert fetched == {MANIFEST}
    assert releases.recorded(settings(), "acme/softmax")["v1.0.0"]["commit"] == first_fetched.commit


def test_a_fresh_cache_has_nothing_to_compare_and_loads_the_rewrite(first_fetched, registry, softmax_bundle,
                                                                    tmp_path, monkeypatch):  # fmt: skip
    """The record is what refuses: without it the rewritten release is indistinguishable from a real one."""
    new = _rewrite_release(registry, softmax_bundle)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "other-cache"))
    assert kernels.get_kernel("acme/softmax", version=1).info.commit == new


def test_a_lock_file_and_a_commit_pin_still_load_what_they_name(first_fetched, registry, softmax_bundle, tmp_path):
    new = _rewrite_release(registry, softmax_bundle)
    lock = tmp_path / "kernels.lock"
    write_lock(lock, [Locked("acme/softmax", 1, first_fetched.commit, "v1.0.0", first_fetched.digest)])
    assert kernels.get_locked_kernel("acme/softmax", lockfile=lock).info.commit == first_fetched.commit
    assert kernels.get_kernel("acme/softmax", revision=first_fetched.commit).softmax(X).shape == X.shape
    # An explicit pin of the new commit is the caller's decision too: the lock wins over the first-use record.
    write_lock(lock, [Locked("acme/softmax", 1, new, "v1.0.0", _rewritten(softmax_bundle).manifest.digest)])
    assert kernels.get_locked_kernel("acme/softmax", lockfile=lock).info.commit == new


def test_kernels_lock_refuses_a_rewritten_release_too(first_fetched, registry, softmax_bundle, tmp_path):
    _rewrite_release(registry, softmax_bundle)
    (tmp_path / "pyproject.toml").write_text('[tool.kernels.dependencies]\n"acme/softmax" = 1\n')
    assert main(["lock", str(tmp_path)]) == 1
    assert not (tmp_path / "kernels.lock").exists()


def test_forget_accepts_a_confirmed_re_release(first_fetched, registry, softmax_bundle, capsys):
    new = _rewrite_release(registry, softmax_bundle)
    assert main(["forget", "acme/softmax", "v9.9.9"]) == 1
    assert "nothing recorded for 'v9.9.9'" in capsys.readouterr().err
    assert main(["forget", "acme/softmax", "v1.0.0"]) == 0
    assert first_fetched.commit in capsys.readouterr().out
    assert kernels.get_kernel("acme/softmax", version=1).info.commit == new
    assert releases.recorded(settings(), "acme/softmax")["v1.0.0"]["commit"] == new  # the new first use


def test_forget_help_says_a_release_is_a_tag_or_the_recorded_commit(capsys):
    with pytest.raises(SystemExit) as done:
        main(["forget", "--help"])
    assert done.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())  # (argparse wraps it to the terminal's width)
    assert re.search(r"\brelease\b[^:]*\btag\b.*\bor the recorded commit\b", help_text), help_text


def test_one_commit_with_another_manifest_is_refused(first_fetched, monkeypatch):
    """A commit is content addressed: the same commit with another manifest digest means a lying server. The
    record is edited to stand for the manifest a first fetch saw (git cannot serve two for one commit)."""
    path = settings().repo_cache("acme/softmax") / releases.RECORD
    data = json.loads(path.read_text())
    endpoint = settings().endpoint
    data[endpoint]["v1.0.0"]["digest"] = "0" * 64
    path.write_text(json.dumps(data))
    with pytest.raises(kernels.ReleaseChangedError, match="0{64}"):
        kernels.get_kernel("acme/softmax", revision="v1.0.0")
    with pytest.raises(kernels.ReleaseChangedError, match="0{64}") as e:  # no tag asked for: the commit is checked
        kernels.get_kernel("acme/softmax", revision=first_fetched.commit)
    assert (e.value.repo_id, e.value.tag) == ("acme/softmax", "v1.0.0")  # named by the tag it was recorded under
    assert e.value.found == {"commit": first_fetched.commit, "digest": first_fetched.digest}
    assert str(e.value).startswith(f"acme/softmax v1.0.0 at {endpoint} is not the release")
    assert f"now:           commit {first_fetched.commit}, manifest sha256:{first_fetched.digest}" in str(e.value)


def test_a_warm_load_does_not_rewrite_the_record_and_offline_agrees(first_fetched, monkeypatch):
    path = settings().repo_cache("acme/softmax") / releases.RECORD
    before = path.stat().st_mtime_ns
    kernels.get_kernel("acme/softmax", version=1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    api.clear_memo()
    assert kernels.get_kernel("acme/softmax", version=1).info.commit == first_fetched.commit
    assert path.stat().st_mtime_ns == before


def test_records_are_per_endpoint(first_fetched):
    other = settings().__class__(**{**settings().__dict__, "endpoint": "http://mirror.example"})
    assert releases.recorded(other, "acme/softmax") == {}
    releases.remember(other, "acme/softmax", "v1.0.0", "1" * 40, "2" * 64)  # another registry's own release
    assert releases.recorded(settings(), "acme/softmax")["v1.0.0"]["commit"] == first_fetched.commit


@pytest.mark.parametrize("damage", ["{not json", "[]", '{"e": []}', '{"e": {"v1.0.0": {"commit": "c"}}}',
                                    '{"e": {"v1.0.0": {"commit": 1, "digest": "d"}}}', '{"e": {"v1.0.0": "c"}}'],
                         ids=["not-json", "a-list", "entries-a-list", "no-digest", "commit-not-text", "entry-text"])
def test_a_damaged_record_is_refused_not_forgotten(first_fetched, damage):
    (settings().repo_cache("acme/softmax") / releases.RECORD).write_text(damage)
    with pytest.raises(kernels.KernelHubError, match="record of first-fetched releases is damaged"):
        kernels.get_kernel("acme/softmax", version=1)


def test_the_refusal_in_full(first_fetched, registry, softmax_bundle):
    new = _rewrite_release(registry, softmax_bundle)
    with pytest.raises(kernels.ReleaseChangedError) as e:
        kernels.get_kernel("acme/softmax", version=1)
    old, d_old, d_new = first_fetched.commit, first_fetched.digest, _rewritten(softmax_bundle).manifest.digest
    assert str(e.value) == (
        f"acme/softmax v1.0.0 at {registry.url} is not the release this cache first fetched:\n"
        f"  first fetched: commit {old}, manifest sha256:{d_old}\n"
        f"  now:           commit {new}, manifest sha256:{d_new}\n"
        f"Releases are immutable, so the release was rewritten on the server, or this is not the server it was. "
        f"Nothing of it was used. To keep what you had, pin it: get_kernel('acme/softmax', revision='{old}') or a "
        f"kernels.lock. If the publisher confirms the re-release, run `nki-kernels forget acme/softmax v1.0.0` and "
        f"retry."
    )
    assert (e.value.repo_id, e.value.tag) == ("acme/softmax", "v1.0.0")


def test_forget_by_commit_and_what_there_is_nothing_to_forget(first_fetched):
    s = settings()
    assert releases.forget(s, "acme/never-fetched", "v1.0.0") is None
    other = s.__class__(**{**s.__dict__, "endpoint": "http://mirror.example"})
    assert releases.forget(other, "acme/softmax", "v1.0.0") is None  # only this endpoint's record is there
    assert releases.forget(s, "acme/softmax", first_fetched.commit) == {
        "v1.0.0": {"commit": first_fetched.commit, "digest": first_fetched.digest}}  # fmt: skip
    assert releases.recorded(s, "acme/softmax") == {}


@pytest.mark.parametrize("change", ["remember", "forget"])
def test_changes_to_the_record_wait_for_its_lock(first_fetched, change):
    """Every read-modify-write of the record holds the one lock (another process holding it is waited for)."""
    from filelock import FileLock

    s = settings()
    path = s.repo_cache("acme/softmax") / releases.RECORD
    done = threading.Event()

    def writer():
        if change == "remember":
            releases.remember(s, "acme/softmax", "v1.9.0", "9" * 40, "9" * 64)
        else:
            releases.forget(s, "acme/softmax", "v1.0.0")
        done.set()

    with FileLock(f"{path}.lock"):
        t = threading.Thread(target=writer)
        t.start()
        assert not done.wait(0.5)  # blocked while the lock is held elsewhere
    t.join()
    assert done.is_set()


def test_concurrent_first_uses_keep_every_record_and_refuse_a_conflict(tmp_path):
    s = settings()
    errors = []

    def first_uses(worker):
        try:
            for i in range(15):
                releases.remember(s, "acme/many", f"v1.{worker}.{i}", f"{worker:02d}{i:02d}".ljust(40, "a"), "b" * 64)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=first_uses, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(releases.recorded(s, "acme/many")) == 90  # no read-modify-write lost an update
    releases.remember(s, "acme/many", "v1.0.0", "0000".ljust(40, "a"), "b" * 64)  # the same again: accepted
    with pytest.raises(kernels.ReleaseChangedError, match=f"^acme/many v1.0.0 at {s.endpoint} is not the release"):
        releases.remember(s, "acme/many", "v1.0.0", "f" * 40, "b" * 64)
    assert releases.recorded(s, "acme/many")["v1.0.0"]["commit"] == "0000".ljust(40, "a")


def test_downloading_a_lock_that_disagrees_with_the_record_warns_and_keeps_both(first_fetched, registry,
                                                                                softmax_bundle, tmp_path):  # fmt: skip
    new = _rewrite_release(registry, softmax_bundle)
    write_lock(tmp_path / "kernels.lock",
               [Locked("acme/softmax", 1, new, "v1.0.0", _rewritten(softmax_bundle).manifest.digest)])  # fmt: skip
    with pytest.warns(UserWarning, match="kernels.lock and this cache disagree about a release"):
        assert main(["download", str(tmp_path)]) == 0  # the lock pins its own loads: they work
    assert kernels.load_kernel("acme/softmax", lockfile=tmp_path / "kernels.lock").info.commit == new
    assert releases.recorded(settings(), "acme/softmax")["v1.0.0"]["commit"] == first_fetched.commit
    with pytest.raises(kernels.ReleaseChangedError):  # and an unpinned call is still held to the first use
        kernels.get_kernel("acme/softmax", version=1)
