"""Memory per request does not grow with the body: the peak RSS (VmHWM) of a registry in its own process, measured
around an authorised commit of a large file, its download, and four anonymous bodies of that size sent at once.

The default run uses 24 MB (the old server peaked at ~6x a commit's size, so it fails this bound already); the
slow run uses the issue's 100 MB (`pytest -m slow`; git alone needs ~4 s to compress 100 MB of random bytes).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download

from hub_client.server.spawn import spawn, stop

from .conftest import WRITE_TOKEN
from .integrity import assert_fsck_clean

MB = 1024 * 1024
BUDGET = 64 * MB  # the bound the issue sets on peak memory above the server's baseline


def _peak_rss(pid: int) -> int:
    """VmHWM: the process's peak resident set size so far, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


@pytest.fixture
def registry_process(hub_env):
    root = hub_env / "hub"
    proc = spawn([sys.executable, "-m", "hub_client.server", "--root", str(root), "--port", "0",
                  "--token", WRITE_TOKEN], stdout=subprocess.PIPE, text=True,
                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline()).group(0)
        yield proc, url, root
    finally:
        stop(proc, signal.SIGINT)
    assert_fsck_clean(root)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
@pytest.mark.parametrize("size_mb", [24, pytest.param(100, marks=pytest.mark.slow)])
def test_peak_memory_of_large_bodies_stays_within_64_mb_of_baseline(registry_process, tmp_path, size_mb):
    proc, url, root = registry_process
    api = HfApi(endpoint=url, token=WRITE_TOKEN)
    api.create_repo("acme/big", repo_type="kernel")
    # Warm up every code path once with a small commit and download, so the baseline includes imports and caches.
    api.upload_file(path_or_fileobj=b"small", path_in_repo="small.bin", repo_id="acme/big", repo_type="kernel")
    hf_hub_download("acme/big", "small.bin", repo_type="kernel", endpoint=url, token=WRITE_TOKEN,
                    cache_dir=tmp_path / "warm")
    baseline = _peak_rss(proc.pid)

    payload = os.urandom(size_mb * MB)  # incompressible: git cannot make the work smaller than the body
    info = api.create_commit("acme/big", repo_type="kernel", commit_message=f"{size_mb} MB",
                             operations=[CommitOperationAdd("weights/big.bin", payload)])
    after_commit = _peak_rss(proc.pid)
    downloaded = hf_hub_download("acme/big", "weights/big.bin", repo_type="kernel", endpoint=url,
                                 token=WRITE_TOKEN, cache_dir=tmp_path / "cache")
    assert Path(downloaded).read_bytes() == payload
    assert info.oid in downloaded  # filed under the commit it came from
    after_download = _peak_rss(proc.pid)

    host, port = urlsplit(url).hostname, urlsplit(url).port
    statuses: list[bytes] = []

    def anonymous_push() -> None:
        """A head promising the size, then the body for as long as the server takes it; then its answer."""
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.sendall(b"POST /api/kernels/acme/big/commit/main HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n" % (size_mb * MB))
            chunk = b"A" * MB
            try:
                for _ in range(size_mb):
                    sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                statuses.append(sock.recv(64).split(b" ")[1])
            except (ConnectionResetError, IndexError):
                statuses.append(b"reset")

    pushers = [threading.Thread(target=anonymous_push) for _ in range(4)]
    for thread in pushers:
        thread.start()
    for thread in pushers:
        thread.join(60)
    after_anonymous = _peak_rss(proc.pid)

    report = (f"baseline {baseline / MB:.1f} MB; peak above it after the {size_mb} MB commit "
              f"{(after_commit - baseline) / MB:.1f} MB, after its download {(after_download - baseline) / MB:.1f} MB, "
              f"after 4 x {size_mb} MB anonymous bodies {(after_anonymous - baseline) / MB:.1f} MB")
    print(report)
    assert after_commit - baseline < BUDGET, report
    assert after_download - baseline < BUDGET, report
    assert after_anonymous - baseline < BUDGET, report
    # Each is refused (the 401 read, or a reset once the server stopped taking the body), and nothing was stored.
    assert len(statuses) == 4 and set(statuses) <= {b"401", b"reset"}, statuses
    assert sorted(api.list_repo_files("acme/big", repo_type="kernel")) == [".gitattributes", "small.bin",
                                                                           "weights/big.bin"]
