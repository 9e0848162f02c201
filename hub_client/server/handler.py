"""The HTTP layer: reads a request, finds its route, checks the token, reads the body, calls the API function.

Built on the standard library's `ThreadingHTTPServer` rather than an ASGI server such as uvicorn (whose source
was read for this: 0.54). uvicorn's `limit_concurrency` answers 503 without `Retry-After`; it has no timeout
until a request's headers are complete (a connection that sends half a request line stays open and counts
against that limit, so a few hundred of them turn the cap into a denial of service); its `receive()` waits for
body data with no timeout at all; it has no body size limit (`h11_max_incomplete_event_size` bounds headers
only). Every bound this registry needs would still be written by hand, and every API function runs blocking git
processes, so an ASGI app would hand each request to a thread pool anyway. Here the bounds sit in one place:

- `DeadlineReader` (wire.py) gives every `recv` what is left of an absolute deadline: idle keep-alive time, then
  the request head, then the body (a stall ends in 408, so does a trickle slower than `Limits.min_body_rate`);
- the route says whether it writes, so the token is checked before a byte of the body is read (and before an
  `Expect: 100-continue` is answered), and an early refusal closes the connection instead of reading on;
- bodies are copied in 64 KiB pieces to a spooled temporary file under a size limit (413), and parsed from it
  by a bounded streaming JSON reader, so memory per request does not grow with the body;
- a semaphore caps worker threads; past it a connection gets 503 + `Retry-After` from a small bounded pool of
  refusal threads, and past that it is closed at once. One thread serves one connection, so the cap counts
  connections: a kept-alive idle connection holds its thread until `Limits.idle_timeout` (15 s) closes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from . import routes, wire
from .auth import TokenTable, require_write
from .errors import HubError
from .limits import Limits
from .protocol import Request, Response
from .registry import Registry

log = logging.getLogger("hub_client.server")

_LINGER_SECONDS = 1.0  # after an early refusal, how long unread body bytes are discarded before closing
_LINGER_BYTES = 4 * 1024 * 1024


class RegistryHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not keep the process alive after close()
    request_queue_size = 128  # many clients connecting at once must not be refused by a short listen backlog

    def __init__(self, address, registry: Registry, tokens: TokenTable, limits: Limits | None = None):
        self.registry = registry
        self.tokens = tokens
        self.limits = limits or Limits()
        self._workers = threading.BoundedSemaphore(self.limits.max_connections)
        self._refusers = threading.BoundedSemaphore(self.limits.refusal_slots)
        self._busy = 0  # worker slots held; read by wait_idle (tests, graceful shutdown)
        self._busy_lock = threading.Lock()
        super().__init__(address, RegistryRequestHandler)

    def _hold(self, delta: int) -> None:
        with self._busy_lock:
            self._busy += delta

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no worker slot is held (a client's close reaches its worker thread a moment later)."""
        deadline = time.monotonic() + timeout
        while self._busy and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._busy

    def process_request(self, request, client_address):
        if self._workers.acquire(blocking=False):
            self._hold(+1)
            try:
                super().process_request(request, client_address)  # a worker thread; it releases the slot
            except BaseException:
                self._hold(-1)
                self._workers.release()
                raise
        elif self._refusers.acquire(blocking=False):
            threading.Thread(target=self._refuse, args=(request,), daemon=True).start()
        else:
            self.shutdown_request(request)  # past both caps: no thread at all

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._hold(-1)
            self._workers.release()

    def _refuse(self, sock: socket.socket) -> None:
        """503 + Retry-After for a connection past the cap, after reading (at most) its request head."""
        try:
            reader = wire.DeadlineReader(sock)
            reader.arm(time.monotonic() + self.limits.refusal_timeout, self.limits.refusal_timeout)
            with contextlib.suppress(OSError, TimeoutError):
                for _ in range(101):  # request line + up to 100 headers, as the standard library allows
                    if reader.readline(65537) in (b"\r\n", b"\n", b""):
                        break
            error = HubError(503, f"The registry is busy ({self.limits.max_connections} connections); retry later",
                             "ServiceUnavailable", {"Retry-After": str(self.limits.retry_after)})
            response = _error_response(error)
            head = [b"HTTP/1.1 503 Service Unavailable"]
            head += [f"{key}: {value}".encode("latin-1") for key, value in response.headers.items()]
            head += [b"Content-Length: %d" % len(response.body), b"Connection: close", b"", b""]
            sock.settimeout(self.limits.refusal_timeout)
            with contextlib.suppress(OSError):
                sock.sendall(b"\r\n".join(head) + response.body)
                _linger(sock, time.monotonic() + min(self.limits.refusal_timeout, _LINGER_SECONDS))
        finally:
            self.shutdown_request(sock)
            self._refusers.release()


def _linger(sock: socket.socket, until: float) -> None:
    """Half-close, then discard what the client is still sending for a moment, so it can read our answer.

    Closing a socket with unread data makes the kernel send a reset, which can destroy the response before the
    client reads it. The discarded bytes are never kept; the time and byte budgets bound what this costs.
    """
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        discarded = 0
        while discarded < _LINGER_BYTES:
            left = until - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            data = sock.recv(wire.PIECE)
            if not data:
                break
            discarded += len(data)


class RegistryRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nki-dsl-registry"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK
    # (~40 ms per keep-alive response on Linux). Small JSON answers must not pay that.
    disable_nagle_algorithm = True
    server: RegistryHTTPServer

    def setup(self) -> None:
        super().setup()
        self.rfile = wire.DeadlineReader(self.connection)  # replaces the buffered socket file: deadlines, see wire
        self._body_pending = False
        self._expects_continue = False

    def handle_one_request(self) -> None:
        """Wait for the next request within the idle timeout, then give its head `head_timeout` to arrive."""
        limits = self.server.limits
        self.rfile.arm(time.monotonic() + limits.idle_timeout, None)
        try:
            if not self.rfile.buffered and not self.rfile.fill():
                self.close_connection = True
                return
        except (TimeoutError, OSError):
            self.close_connection = True
            return
        self.rfile.arm(time.monotonic() + limits.head_timeout, None)
        self._expects_continue = False
        super().handle_one_request()  # reads the head (TimeoutError there: it closes), then calls do_<METHOD>

    def handle_expect_100(self) -> bool:
        """Defer the standard library's immediate `100 Continue` until the route and token have been checked."""
        self._expects_continue = True
        return True

    def do_GET(self):
        self._handle()

    def do_HEAD(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def _handle(self) -> None:
        limits = self.server.limits
        body = None
        self._body_pending = self.headers.get("Content-Length", "0").strip() not in ("", "0") or bool(
            self.headers.get("Transfer-Encoding"))
        try:
            try:
                split = urlsplit(self.path)
                route, params = routes.match(self.command, split.path)
                identity = self.server.tokens.identify(self.headers.get("Authorization"))
                if route.needs_write:
                    require_write(identity)  # before the body: an anonymous 200 MB commit is never read
                length = wire.declared_length(self.headers)
                if self._expects_continue:
                    # Only now, with the token accepted, invite the client to send the body (RFC 9110 10.1.1).
                    self.send_response_only(100)
                    self.end_headers()
                limit = limits.max_commit_body if route.large_body else limits.max_json_body
                body = wire.read_body(self.rfile, length, limit, self.server.registry.scratch, limits.read_timeout,
                                      limits.min_body_rate)
                self._body_pending = False
                request = Request(
                    method=self.command,
                    params=params,
                    query=dict(parse_qsl(split.query, keep_blank_values=True)),
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=body,
                    identity=identity,
                    base_url=f"http://{self.headers.get('Host') or self._own_address()}",
                )
                # Writing the answer must not hang on a client that stopped reading either.
                self.rfile.arm(None, limits.read_timeout)
                response = route.handler(self.server.registry, request)
            finally:
                if body is not None:
                    body.close()
        except HubError as error:
            response = _error_response(error)
        except Exception:
            log.exception("internal error on %s %s", self.command, self.path)
            response = _error_response(HubError(500, "Internal server error"))
        if self.command == "HEAD":
            response.send_body = False
        if self._body_pending:
            # Refused before the body was read (or while reading it): what follows on the connection is body
            # bytes, not a next request, so this answer is the last one.
            response.headers["Connection"] = "close"
            self.close_connection = True
        self.connection.settimeout(limits.read_timeout)  # a client that stops reading cannot hold the thread
        try:
            self._send(response)
        except (TimeoutError, ConnectionError) as error:
            log.debug("%s %s: client went away while the answer was sent (%s)", self.command, self.path, error)
            self.close_connection = True
            return
        if self._body_pending:
            self.wfile.flush()
            _linger(self.connection, time.monotonic() + _LINGER_SECONDS)

    def _own_address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        headers = dict(response.headers)
        headers.setdefault("Content-Length", str(len(response.body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if not response.send_body:
            return
        if response.stream is None:
            if response.body:
                self.wfile.write(response.body)
            return
        sent = 0
        for piece in response.stream():
            self.wfile.write(piece)
            sent += len(piece)
        if sent != int(headers["Content-Length"]):
            # The status line is gone already; the only honest signal left is to end the connection early.
            log.error("streamed %d of %s bytes for %s", sent, headers["Content-Length"], self.path)
            self.close_connection = True

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        log.debug("%s %s", self.address_string(), format % args)


def _error_response(error: HubError) -> Response:
    headers = {"X-Error-Message": _header_safe(error.message), **error.headers}
    if error.code:
        headers["X-Error-Code"] = error.code
    return Response.json({"error": error.message, **error.extra}, error.status, headers)


def _header_safe(text: str) -> str:
    """Header values must be one line of latin-1; repo paths in messages may be neither."""
    return json.dumps(text, ensure_ascii=True)[1:-1].replace("\\\"", "'")
