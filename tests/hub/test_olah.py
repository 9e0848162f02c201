"""An independent caching Hub mirror, olah 0.5.4 (a throwaway venv in pytest's cache), in front of the running
registry: the real huggingface_hub client and ``kernels.get_kernel`` through it see what they see directly.

olah asks the upstream for ``HEAD /api/<type>s/...``, ``POST .../paths-info/<rev>`` and ``.../commits/<rev>``
before it serves or caches anything, so this is the test of those routes with a client this project did not
write. Slow: ``pytest -m slow tests/hub/test_olah.py``.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import HfApi, hf_hub_download

import kernels
from hub_client.publish import publish
from hub_client.server.spawn import spawn, stop
from kernels.softmax import softmax_reference
from tests.hub import hf_venv
from tests.hub.conftest import settings

pytestmark = pytest.mark.slow
OLAH = "0.5.4"


@pytest.fixture(scope="session")
def olah_python(request, tmp_path_factory) -> Path:
    cache = request.config.cache
    root = cache.mkdir(f"olah-{OLAH}-venv") if cache else tmp_path_factory.mktemp("olah-venv")
    return hf_venv.ensure_venv(Path(root), "olah", OLAH)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mirror(olah_python, registry, tmp_path, monkeypatch):
    upstream = registry.url.split("//", 1)[1]
    port = _free_port()
    here = f"127.0.0.1:{port}"
    log = open(tmp_path / "olah.log", "w")  # noqa: SIM115 - a file, not a pipe: it can never fill up
    proc = spawn([str(olah_python.parent / "olah-cli"), "--host", "127.0.0.1", "--port", str(port),
                  "--hf-scheme", "http", "--hf-netloc", upstream, "--hf-lfs-netloc", upstream,
                  "--mirror-netloc", here, "--mirror-lfs-netloc", here, "--repos-path", str(tmp_path / "olah-repos"),
                  "--log-path", str(tmp_path / "olah-logs")], stdout=log, stderr=log, cwd=tmp_path)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"olah did not start:\n{(tmp_path / 'olah.log').read_text()}") from None
                time.sleep(0.2)
        yield f"http://{here}"
    finally:
        stop(proc)
        log.close()


def test_the_mirror_serves_what_the_registry_serves(registry, mirror, softmax_bundle, monkeypatch):
    p = publish(softmax_bundle, "acme/softmax", settings())
    direct, through = HfApi(endpoint=registry.url), HfApi(endpoint=mirror)
    for api in (direct, through):
        assert api.repo_info("acme/softmax", repo_type="kernel", revision="v1").sha == p.commit
    tree = sorted((e.path, getattr(e, "blob_id", None)) for e in direct.list_repo_tree(
        "acme/softmax", repo_type="kernel", revision="v1", recursive=True))  # fmt: skip
    assert sorted((e.path, getattr(e, "blob_id", None)) for e in through.list_repo_tree(
        "acme/softmax", repo_type="kernel", revision="v1", recursive=True)) == tree  # fmt: skip
    paths = ["manifest.json", "build/torch-neuron/metadata.json", "build"]
    assert through.get_paths_info("acme/softmax", paths, repo_type="kernel", revision=p.commit) == (
        direct.get_paths_info("acme/softmax", paths, repo_type="kernel", revision=p.commit))  # fmt: skip
    assert [c.commit_id for c in through.list_repo_commits("acme/softmax", repo_type="kernel", revision="v1")] == [
        c.commit_id for c in direct.list_repo_commits("acme/softmax", repo_type="kernel", revision="v1")]  # fmt: skip
    got = hf_hub_download("acme/softmax", "build/torch-neuron/metadata.json", repo_type="kernel", revision=p.commit,
                          endpoint=mirror, cache_dir=settings().cache_dir / "via-mirror")  # fmt: skip
    assert Path(got).read_bytes() == softmax_bundle.files["build/torch-neuron/metadata.json"]
    # The whole load path through the mirror: resolve, download, every digest checked, the IR run.
    monkeypatch.setenv("HF_ENDPOINT", mirror)
    # olah does not pass on /api/organizations/<org>/overview (it answers 401): the publisher's trust cannot be
    # checked, so only the verified IR runs, and the load says so.
    with pytest.warns(UserWarning, match="could not verify the publisher trust status of 'acme'"):
        k = kernels.get_kernel("acme/softmax", version=1)
    assert (k.info.commit, k.info.digest) == (p.commit, p.digest)
    x = np.random.default_rng(0).standard_normal((300, 512)).astype(np.float32)
    np.testing.assert_allclose(k.softmax(x), softmax_reference(x), rtol=1e-5, atol=1e-7)
