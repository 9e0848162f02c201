"""The request and response values the API functions see, independent of the HTTP server underneath."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from . import jsonstream
from .auth import Identity
from .errors import bad_request


@dataclass
class Request:
    method: str
    params: dict[str, str]  # path parameters, already percent-decoded
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: IO[bytes]  # positioned at 0; on disk past 1 MiB (see wire.read_body)
    identity: Identity
    base_url: str  # scheme://host:port the client used, for URLs the Hub returns in bodies

    def json(self) -> dict[str, Any]:
        self.body.seek(0)
        if not self.body.read(1):
            return {}
        self.body.seek(0)
        value = jsonstream.loads(self.body)
        if not isinstance(value, dict):
            raise bad_request("Request body must be a JSON object")
        return value

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").lower() in ("1", "true", "yes")


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    send_body: bool = True  # False for HEAD: headers describe the body, which is not sent
    # A large body produced piece by piece (a file download) instead of `body`; Content-Length must be set.
    stream: Callable[[], Iterator[bytes]] | None = None

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        body = json.dumps(value).encode()
        return cls(status, body, {"Content-Type": "application/json", **(headers or {})})
