"""Starting and stopping a registry: `serve(root, ...)` returns a running server with `.url` and `.close()`."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from .auth import TokenTable
from .handler import RegistryHTTPServer
from .limits import Limits
from .registry import Registry


class RegistryServer:
    """A registry serving `root` on a background thread. Use as a context manager or call `close()`."""

    def __init__(self, root, host: str = "127.0.0.1", port: int = 0, tokens=None, trusted_publishers=(),
                 limits: Limits | None = None):
        self.limits = limits or Limits()
        self.registry = Registry(Path(root), frozenset(trusted_publishers), self.limits)
        self._http = RegistryHTTPServer((host, port), self.registry, TokenTable(tokens), self.limits)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return self._http.server_address[0]

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def url(self) -> str:
        """The endpoint to give huggingface_hub (`HfApi(endpoint=url)`, `HF_ENDPOINT=url`)."""
        return f"http://{self.host}:{self.port}"

    @property
    def root(self) -> Path:
        return self.registry.root

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """True once no connection holds a worker slot (within ``timeout`` seconds)."""
        return self._http.wait_idle(timeout)

    def start(self) -> RegistryServer:
        # serve_forever notices shutdown() only between polls; a short poll makes close() prompt (test suites start
        # and stop a registry per test) at the cost of 20 idle wake-ups a second.
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, name=f"registry:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (the command-line entry point)."""
        try:
            self._http.serve_forever()
        finally:
            self._http.server_close()

    def close(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> RegistryServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(
    root,
    host: str = "127.0.0.1",
    port: int = 0,
    tokens: Iterable[str] | Mapping[str, str] | None = None,
    trusted_publishers: Iterable[str] = (),
    limits: Limits | None = None,
) -> RegistryServer:
    """Start a registry on a background thread and return it, already accepting connections.

    `tokens`: write tokens, or a mapping token -> "read" | "write". Without any, the registry is read-only.
    `trusted_publishers`: organisations whose overview reports `trustedKernelPublisher: true`.
    `port=0` picks a free ephemeral port; read it back from `.url`.
    `limits`: body sizes, timeouts and the connection cap (see `Limits`); the defaults suit a team registry.
    """
    return RegistryServer(root, host, port, tokens, trusted_publishers, limits).start()
