"""A connection cut in the middle of a file: a clear error or a retry, never a truncated file in the cache.

A small HTTP proxy in front of the registry forwards everything, except that GETs of the IR files send their
headers (with the full Content-Length) and half the body, then close the connection.
"""

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import numpy as np
import pytest

import kernels
from hub_client.publish import publish
from tests.hub.conftest import cache_dir, settings


def _proxy(upstream: str, cut: dict):
    host, port = urlsplit(upstream).hostname, urlsplit(upstream).port

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            conn = http.client.HTTPConnection(host, port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
            truncate = self.command == "GET" and ".nkir" in self.path and cut["remaining"] > 0
            if truncate:
                cut["remaining"] -= 1
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data[: len(data) // 2] if truncate else data)
            if truncate:
                self.wfile.flush()
                self.close_connection = True

        do_GET = do_HEAD = do_POST = _forward  # noqa: N815 (http.server dispatches on these names)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def cutting_proxy(registry, softmax_bundle, monkeypatch):
    publish(softmax_bundle, "acme/softmax", settings())
    cut = {"remaining": 0}
    server = _proxy(registry.url, cut)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield cut
    server.shutdown()
    server.server_close()


def _no_partial_files(bundle):
    snap = next(cache_dir().rglob("snapshots"), None)
    for p in snap.rglob("*.nkir") if snap else []:
        assert p.read_bytes() == bundle.files[str(p.relative_to(p.parents[2]))], f"truncated {p} in the cache"


def test_every_attempt_cut_fails_clearly_and_leaves_no_truncated_file(cutting_proxy, softmax_bundle, hf_backoff):
    cutting_proxy["remaining"] = 1000
    with pytest.raises(kernels.DownloadError, match="Nothing partial was kept"):
        kernels.get_kernel("acme/softmax", version=1)
    assert hf_backoff.waits  # after huggingface_hub's own retries of the cut transfer
    _no_partial_files(softmax_bundle)
    cutting_proxy["remaining"] = 0  # the network recovers: the same call succeeds
    k = kernels.get_kernel("acme/softmax", version=1)
    assert k.softmax(np.ones((128, 512), np.float32)).shape == (128, 512)
    _no_partial_files(softmax_bundle)


def test_one_cut_is_retried(cutting_proxy, softmax_bundle, hf_backoff):
    cutting_proxy["remaining"] = 1
    k = kernels.get_kernel("acme/softmax", version=1)
    assert len(hf_backoff.waits) == 1  # one cut, one retry
    assert k.softmax(np.ones((128, 512), np.float32)).shape == (128, 512)
    _no_partial_files(softmax_bundle)
