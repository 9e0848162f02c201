"""The HTTP layer: reads a request, finds its route, checks the token, calls the API function, writes the answer.

Built on the standard library's `ThreadingHTTPServer`: the registry needs no dependency beyond git, one thread
per connection is plenty for a team registry or a test suite (each request's cost is a few short git
processes, which release the GIL), and HTTP/1.1 keep-alive lets huggingface_hub reuse its connections.
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from . import routes
from .auth import TokenTable
from .errors import HubError, bad_request
from .protocol import Request, Response
from .registry import Registry

log = logging.getLogger("hub_client.server")

MAX_BODY = 512 * 1024 * 1024  # a commit carries files inline as base64; refuse anything past half a GiB


class RegistryHTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not keep the process alive after close()
    request_queue_size = 128  # many clients connecting at once must not be refused by a short listen backlog

    def __init__(self, address, registry: Registry, tokens: TokenTable):
        self.registry = registry
        self.tokens = tokens
        super().__init__(address, RegistryRequestHandler)


class RegistryRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nki-dsl-registry"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK
    # (~40 ms per keep-alive response on Linux). Small JSON answers must not pay that.
    disable_nagle_algorithm = True
    timeout = 60  # drop connections idle this long, so abandoned keep-alives do not pin threads forever
    server: RegistryHTTPServer

    def do_GET(self):
        self._handle()

    def do_HEAD(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def _handle(self) -> None:
        try:
            body = self._read_body()
            split = urlsplit(self.path)
            handler, params = routes.match(self.command, split.path)
            request = Request(
                method=self.command,
                params=params,
                query=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={key.lower(): value for key, value in self.headers.items()},
                body=body,
                identity=self.server.tokens.identify(self.headers.get("Authorization")),
                base_url=f"http://{self.headers.get('Host') or self._own_address()}",
            )
            response = handler(self.server.registry, request)
        except HubError as error:
            response = _error_response(error)
        except Exception:
            log.exception("internal error on %s %s", self.command, self.path)
            response = _error_response(HubError(500, "Internal server error"))
        if self.command == "HEAD":
            response.send_body = False
        self._send(response)

    def _own_address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        if not length.isdigit():
            self.close_connection = True
            raise bad_request("Invalid Content-Length")
        if int(length) > MAX_BODY:
            self.close_connection = True  # the unread body would otherwise be parsed as the next request
            raise HubError(413, f"Request body larger than {MAX_BODY} bytes")
        return self.rfile.read(int(length))

    def _read_chunked(self) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                self.close_connection = True
                raise bad_request("Malformed chunked body") from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise HubError(413, f"Request body larger than {MAX_BODY} bytes")
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        headers = dict(response.headers)
        headers.setdefault("Content-Length", str(len(response.body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if response.send_body and response.body:
            self.wfile.write(response.body)

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
