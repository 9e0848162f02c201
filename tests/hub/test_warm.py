"""Warm loads: what needs the network and what does not (figures are in benchmarks/hub_speed.py, not here).

A pinned commit, a lock file and load_kernel use the cache alone once a release is verified there: no request,
and in a fresh process not even an import of huggingface_hub. get_kernel(version=N) online revalidates with one
refs request, so a release published since is seen at once.
"""

import hashlib
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kernels
from hub_client import api
from hub_client.lockfile import Locked, write_lock
from hub_client.publish import publish
from tests.hub.conftest import ROOT, settings


def test_cached_commit_needs_no_request(registry, softmax_bundles, monkeypatch):
    p = publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", revision=p.commit)
    api.clear_memo()
    registry.close()  # online, but nothing answers: a request would fail or warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = kernels.get_kernel("acme/softmax", revision=p.commit)
    assert k.info.commit == p.commit and k.info.version == "1.0.0"


def test_version_revalidates_and_sees_a_new_release(registry, softmax_bundles, monkeypatch):
    publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    assert kernels.get_kernel("acme/softmax", version=1).info.version == "1.0.0"
    publish(softmax_bundles["1.1.0"], "acme/softmax", settings())
    api.clear_memo()  # a fresh process: nothing resolved in memory, the cache warm
    assert kernels.get_kernel("acme/softmax", version=1).info.version == "1.1.0"


_FRESH = """
import sys, kernels
k = kernels.{call}
print(k.info.commit, "huggingface_hub" in sys.modules)
"""


def test_locked_loads_in_a_fresh_process_never_import_huggingface_hub(registry, softmax_bundles, tmp_path):
    p = publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", revision=p.commit)
    lock = tmp_path / "kernels.lock"
    write_lock(lock, [Locked("acme/softmax", 1, p.commit, p.tag, p.digest)])
    registry.close()  # same endpoint (what was recorded about it still applies), but nothing answers there now
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for call in (f"load_kernel('acme/softmax', lockfile={str(lock)!r})",
                 f"get_locked_kernel('acme/softmax', lockfile={str(lock)!r})",
                 f"get_kernel('acme/softmax', revision={p.commit!r})"):  # fmt: skip
        out = subprocess.run([sys.executable, "-c", _FRESH.format(call=call)], env=env, capture_output=True,
                             text=True, check=True, cwd=tmp_path)  # fmt: skip
        assert out.stdout.split() == [p.commit, "False"], (call, out.stderr)


def test_recorded_resolution_is_written_once(registry, softmax_bundle):
    publish(softmax_bundle, "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", version=1)
    refs = settings().repo_cache("acme/softmax") / "kernel-refs.json"
    before = refs.stat().st_mtime_ns
    api.clear_memo()
    kernels.get_kernel("acme/softmax", version=1)
    assert refs.stat().st_mtime_ns == before  # an unchanged resolution is not rewritten
    assert json.loads(refs.read_text())["version:1"]["label"] == "v1.0.0"


def _tamper_cached_ir(k, *, same_size: bool) -> tuple[str, bytes]:
    """Overwrite a cached IR file of a loaded kernel (the blob its snapshot entry links to); (path, evil bytes)."""
    ir = next((k.info.path / "ir").rglob("*.nkir"))
    blob = ir.resolve()
    good = blob.read_bytes()
    evil = good.replace(b"nl.exp", b"nl.log") if same_size else good + b"\n"
    assert evil != good and (len(evil) == len(good)) == same_size
    st = blob.stat()
    blob.write_bytes(evil)
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a later write, whatever the clock's tick
    return str(ir.relative_to(k.info.path)), evil


@pytest.mark.parametrize("same_size", [False, True], ids=["other-size", "same-size-later-mtime"])
def test_a_cache_file_changed_after_a_verified_load_is_rehashed_and_refused(registry, softmax_bundles, same_size):
    """The receipt lets a warm load skip hashing only while size and mtime are what was verified."""
    p = publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    k = kernels.get_kernel("acme/softmax", revision=p.commit)
    rel, evil = _tamper_cached_ir(k, same_size=same_size)
    api.clear_memo()
    with pytest.raises(kernels.DigestMismatchError) as e:
        kernels.get_kernel("acme/softmax", revision=p.commit)
    assert rel in str(e.value) and hashlib.sha256(evil).hexdigest() in str(e.value)
    assert not (k.info.path / rel).exists()  # the bad copy was purged; the next online call downloads it afresh
    assert kernels.get_kernel("acme/softmax", revision=p.commit).softmax(np.ones((128, 512), np.float32)).shape


def test_an_untouched_warm_load_does_not_rehash(registry, softmax_bundles, monkeypatch):
    """The other side of the receipt: an unchanged file is not read again (what keeps warm loads fast)."""
    from hub_client import fetch

    p = publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", revision=p.commit)
    api.clear_memo()
    hashed = []
    real = fetch._check
    monkeypatch.setattr(fetch, "_check", lambda path, rel, *a: (hashed.append(rel), real(path, rel, *a)))
    kernels.get_kernel("acme/softmax", revision=p.commit)
    assert hashed == []
