"""What a client may cost the registry: the token is checked before a body is read, bodies have a size limit (413),
stalled or trickling clients get 408 and free their thread, connections past the cap get 503 + Retry-After, and
a half-sent request head or an idle keep-alive is dropped in bounded time."""

from __future__ import annotations

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from hub_client.server import Limits, serve

from .conftest import READ_TOKEN, WRITE_TOKEN, ndjson, raw_request
from .integrity import assert_fsck_clean

COMMIT_PATH = "/api/kernels/acme/softmax/commit/v1"


def _connect(server) -> socket.socket:
    url = urlsplit(server.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    return sock


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response off a raw socket: status, lower-cased headers, body (by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            raise ConnectionError(f"closed before a complete response head: {data!r}")
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    while len(body) < int(headers.get("content-length", "0")):
        piece = sock.recv(65536)
        if not piece:
            break
        body += piece
    return int(status_line.split()[1]), headers, body


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.fixture
def tight(hub_env):
    """A registry with small limits, so each bound is reached in a fraction of a second."""
    limits = Limits(max_commit_body=256 * 1024, max_json_body=16 * 1024, max_connections=3, refusal_slots=2,
                    refusal_timeout=1.0, idle_timeout=1.0, head_timeout=0.5, read_timeout=0.5, min_body_rate=64 * 1024)
    server = serve(hub_env / "hub", tokens={WRITE_TOKEN: "write", READ_TOKEN: "read"}, limits=limits)
    # Raw requests close their connection: no kept-alive client connection holds one of the few worker threads.
    created = raw_request(server, "POST", "/api/repos/create", {"name": "softmax", "organization": "acme",
                                                                 "type": "kernel"}, token=WRITE_TOKEN)
    branched = raw_request(server, "POST", "/api/kernels/acme/softmax/branch/v1", {}, token=WRITE_TOKEN)
    assert created.status == branched.status == 200
    # A closed connection frees its worker slot a moment after the client sees the response: tests that fill
    # every slot must start from an idle registry, not race the setup's last worker thread.
    assert server.wait_idle()
    yield server
    server.close()
    assert_fsck_clean(server.root)


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("wrong-token", 401), (READ_TOKEN, 403)])
def test_a_write_without_a_write_token_is_refused_before_its_body_is_read(registry, kernel_repo, token, status):
    """The head promises 200 MB and no byte of it is sent: the refusal still arrives, so the server did not wait
    for (let alone read or store) the body; the connection is then closed, not read on."""
    sock = _connect(registry)
    headers = {"Content-Length": str(200 * 1024 * 1024), "Content-Type": "application/x-ndjson"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        sock.sendall(_head("POST", COMMIT_PATH, headers))
        got, response_headers, body = _read_response(sock)
        assert got == status and json.loads(body)["error"]
        assert response_headers["connection"] == "close"
        assert _closed_by_server(sock, within=5)
    finally:
        sock.close()


def test_a_commit_body_past_the_limit_is_413_and_writes_nothing(tight):
    api = HfApi(endpoint=tight.url, token=WRITE_TOKEN)
    before = api.list_repo_refs("acme/softmax", repo_type="kernel").branches
    with pytest.raises(HfHubHTTPError) as caught:  # the real client: preupload passes, the commit body is too big
        api.create_commit("acme/softmax", repo_type="kernel", revision="v1", commit_message="too big",
                          operations=[CommitOperationAdd("big.bin", b"\x01" * 300 * 1024)])
    assert caught.value.response.status_code == 413
    assert "limit" in caught.value.response.headers["x-error-message"]
    assert api.list_repo_refs("acme/softmax", repo_type="kernel").branches == before
    # Just under the limit still lands: the limit is on the body, not a guess.
    api.create_commit("acme/softmax", repo_type="kernel", revision="v1", commit_message="fits",
                      operations=[CommitOperationAdd("fits.bin", b"\x01" * 150 * 1024)])


def test_a_chunked_body_past_the_limit_is_413(tight):
    sock = _connect(tight)
    try:
        sock.sendall(_head("POST", COMMIT_PATH, {"Authorization": f"Bearer {WRITE_TOKEN}",
                                                 "Transfer-Encoding": "chunked"}))
        chunk = b"x" * 65536
        status = None
        for _ in range(8):  # 512 KiB in 64 KiB chunks against a 256 KiB limit
            try:
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
        status, _, _ = _read_response(sock)
        assert status == 413
    finally:
        sock.close()


def test_a_json_body_past_its_smaller_limit_is_413(tight):
    files = [{"path": f"f{i}.txt", "sample": "", "size": 1} for i in range(1000)]  # ~40 KiB against 16 KiB
    response = raw_request(tight, "POST", "/api/kernels/acme/softmax/preupload/v1", {"files": files},
                           token=WRITE_TOKEN)
    assert response.status == 413 and response.headers["x-error-message"]


def test_a_stalled_body_is_408_and_frees_its_thread(tight):
    """Every worker slot stalls mid-body; each gets a 408 within the read timeout, then the registry serves again."""
    stalled = [_connect(tight) for _ in range(tight.limits.max_connections)]
    began = time.monotonic()
    try:
        for sock in stalled:
            sock.sendall(_head("POST", COMMIT_PATH, {"Authorization": f"Bearer {WRITE_TOKEN}",
                                                     "Content-Length": "1000"}) + b'{"key": "hea')
        for sock in stalled:
            status, headers, body = _read_response(sock)
            assert status == 408 and "stalled" in json.loads(body)["error"]
            assert headers["connection"] == "close"
        assert time.monotonic() - began < 20  # bounded by the 0.5 s read timeout, far below the old 60 s hold
    finally:
        for sock in stalled:
            sock.close()
    _eventually_ok(tight)


def test_a_trickling_body_is_408(tight):
    """A byte every 0.2 s never trips the 0.5 s stall timeout, but is far below the minimum average rate (64 KiB/s):
    the body is behind schedule within about a second."""
    sock = _connect(tight)
    try:
        sock.sendall(_head("POST", COMMIT_PATH, {"Authorization": f"Bearer {WRITE_TOKEN}",
                                                 "Content-Length": "100000"}))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                sock.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            sock.settimeout(0.2)
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    break
            except TimeoutError:
                continue
        sock.settimeout(5)
        status, _, body = _read_response(sock)
        assert status == 408 and "bytes/s" in json.loads(body)["error"]
    finally:
        sock.close()


def _read_refs(server):
    """A plain read, or None if the connection was closed without an answer: what the registry does while both its
    workers and its refusal threads are busy (a refusal thread lives a moment past the refusal it sent)."""
    try:
        return raw_request(server, "GET", "/api/kernels/acme/softmax/refs")
    except (http.client.RemoteDisconnected, ConnectionResetError):
        return None


def _eventually_ok(server, attempts: int = 50, expected: int = 200) -> None:
    """The registry answers a plain read again (worker slots are released a moment after the refusal is sent).
    Until then a request is refused with 503 or closed unanswered: both are the caps working, not a failure."""
    for _ in range(attempts):
        response = _read_refs(server)
        if response is None:
            time.sleep(0.1)
            continue
        if response.status == expected:
            return
        assert response.status == 503
        time.sleep(0.1)
    raise AssertionError("the registry never recovered its worker threads")


def test_connections_past_the_cap_get_503_with_retry_after(hub_env):
    # Its own registry: the holders must keep their workers for the whole test, so the head timeout is long.
    limits = Limits(max_connections=2, refusal_slots=2, head_timeout=60.0, idle_timeout=60.0)
    with serve(hub_env / "hub", tokens=[WRITE_TOKEN], limits=limits) as server:
        holders = [_connect(server) for _ in range(limits.max_connections)]
        try:
            for sock in holders:  # each holds a worker: a head that is still arriving
                sock.sendall(b"GET /api/kernels/acme/softmax/refs HTTP/1.1\r\n")
            refused = raw_request(server, "GET", "/api/kernels/acme/softmax/refs")
            for _ in range(50):  # the holders' threads may still be starting: wait for the cap to be reached
                if refused.status == 503:
                    break
                time.sleep(0.05)
                refused = raw_request(server, "GET", "/api/kernels/acme/softmax/refs")
            assert refused.status == 503
            assert refused.headers["retry-after"] == str(limits.retry_after)
            assert "busy" in refused.headers["x-error-message"] and refused.json()["error"]
        finally:
            for sock in holders:
                sock.close()
        _eventually_ok(server, expected=404)  # the repo does not exist here: a 404 means "served"


def test_a_refused_request_is_answered_when_its_head_is_in_not_at_the_refusal_timeout(hub_env):
    """The refusal reads the request head up to its blank line and answers then; the refusal timeout only bounds a
    head that never ends. With a 120 s refusal timeout, a complete request still gets its 503 well inside the
    client's 30 s (a refusal that missed the CRLF blank line would wait the whole 120 s)."""
    limits = Limits(max_connections=1, refusal_slots=1, refusal_timeout=120.0, head_timeout=60.0, idle_timeout=60.0)
    with serve(hub_env / "hub", tokens=[WRITE_TOKEN], limits=limits) as server:
        holder = _connect(server)
        try:
            holder.sendall(b"GET /api/kernels/acme/softmax/refs HTTP/1.1\r\n")  # holds the one worker
            # until the holder has the worker: on a loaded machine the server may take seconds to hand it over,
            # and until then a request is served (404), not refused; a deadline, not a count of tries
            deadline = time.monotonic() + 30
            while True:
                refused = _read_refs(server)
                if (refused is not None and refused.status == 503) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert refused is not None and refused.status == 503 and "busy" in refused.headers["x-error-message"]
        finally:
            holder.close()
        _eventually_ok(server, expected=404)


def test_past_the_worker_and_refusal_caps_a_connection_is_closed_at_once(hub_env):
    """No thread at all is spent on a connection once both pools are busy: it is closed without an answer."""
    limits = Limits(max_connections=1, refusal_slots=1, refusal_timeout=30.0, head_timeout=60.0)
    with serve(hub_env / "hub", tokens=[WRITE_TOKEN], limits=limits) as server:
        worker, refuser = _connect(server), None
        try:
            worker.sendall(b"GET /api/kernels/acme/softmax/refs HTTP/1.1\r\n")  # holds the one worker
            refuser = _connect(server)  # holds the one refusal thread: it waits for a head that never comes
            time.sleep(0.2)
            dropped = _connect(server)
            try:
                began = time.monotonic()
                dropped.sendall(_head("GET", "/api/kernels/acme/softmax/refs", {}))
                assert _closed_by_server(dropped, within=10) and time.monotonic() - began < 5
            finally:
                dropped.close()
        finally:
            worker.close()
            if refuser is not None:
                refuser.close()


def test_a_half_sent_request_head_is_dropped_after_the_head_timeout(tight):
    sock = _connect(tight)
    try:
        sock.sendall(b"GET /api/kernels/acme/softmax/refs HTTP/1.1\r\nHost: x\r\n")  # never finished
        assert _closed_by_server(sock, within=10)
    finally:
        sock.close()


def test_a_head_dripped_byte_by_byte_is_dropped_after_the_head_timeout(tight):
    """Each byte arrives well within any per-read timeout; the head's deadline is absolute, so it still ends."""
    sock = _connect(tight)
    began = time.monotonic()
    try:
        closed = False
        for byte in b"GET /api/kernels/acme/softmax/refs HTTP/1.1\r\nX-Padding: " + b"a" * 200:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if _closed_by_server(sock, within=0.05):
                closed = True
                break
        assert closed and time.monotonic() - began < 10
    finally:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(tight):
    sock = _connect(tight)
    try:
        sock.sendall(_head("GET", "/api/kernels/acme/softmax/refs", {}))
        status, _, _ = _read_response(sock)
        assert status == 200
        assert _closed_by_server(sock, within=10)
    finally:
        sock.close()


def test_limits_are_checked(hub_env):
    with pytest.raises(ValueError, match="max_connections"):
        Limits(max_connections=0)


def test_a_body_within_limits_still_round_trips_base64_exactly(tight):
    """The streaming decoder against the ordinary one on every padding length and a chunk-boundary-sized file."""
    api = HfApi(endpoint=tight.url, token=WRITE_TOKEN)
    contents = {f"pad{n}.bin": bytes(range(256))[:n] * 3 for n in range(1, 5)}
    contents["boundary.bin"] = bytes(i % 251 for i in range(2 * 65536 + 1))
    api.create_commit("acme/softmax", repo_type="kernel", revision="v1", commit_message="bytes",
                      operations=[CommitOperationAdd(path, data) for path, data in contents.items()])
    # The client's kept-alive connections hold workers until the idle timeout closes them: wait for that to have
    # happened rather than sleep for it (a fixed sleep races the server's threads on a loaded machine).
    assert tight.wait_idle(timeout=30)
    for path, data in contents.items():
        assert raw_request(tight, "GET", f"/kernels/acme/softmax/resolve/v1/{path}").body == data
    for bad in ("eA=", "eA==eA==", "e===", "eA\u00e9=", "eA==\\n"):
        body = ndjson({"key": "header", "value": {"summary": "bad"}},
                      {"key": "file", "value": {"content": bad, "path": "x.bin", "encoding": "base64"}})
        response = raw_request(tight, "POST", COMMIT_PATH, body, token=WRITE_TOKEN)
        assert response.status == 400 and "base64" in response.headers["x-error-message"], bad


def test_expect_100_continue_is_answered_only_once_the_token_is_accepted(tight):
    body = ndjson({"key": "header", "value": {"summary": "continued"}},
                  {"key": "file", "value": {"content": "eA==", "path": "c.txt", "encoding": "base64"}})
    head = {"Content-Length": str(len(body)), "Expect": "100-continue"}
    sock = _connect(tight)
    try:  # anonymous: the refusal comes instead of the invitation to send
        sock.sendall(_head("POST", COMMIT_PATH, head))
        status, _, _ = _read_response(sock)
        assert status == 401
    finally:
        sock.close()
    sock = _connect(tight)
    try:
        sock.sendall(_head("POST", COMMIT_PATH, {**head, "Authorization": f"Bearer {WRITE_TOKEN}"}))
        interim = sock.recv(64)
        assert interim.startswith(b"HTTP/1.1 100"), interim
        sock.sendall(body)
        status, _, answer = _read_response(sock)
        assert status == 200 and json.loads(answer)["commitOid"]
    finally:
        sock.close()
