"""The HTTP client huggingface_hub uses in this process: its default, except that TLS is set up on first https use.

huggingface_hub's default client factory builds an ``httpx2.Client`` whose transport loads the CA bundle at
construction (``ssl.create_default_context`` + ``load_verify_locations``: ~20 ms). A fresh process that only
revalidates a cached kernel against a plain-http registry (a self-hosted one on a team network or loopback) paid
that for a TLS context it never used: it was most of a warm ``get_kernel``'s time in a new process.

The factory installed here keeps every default (event hook, redirects, no timeout, proxies from the environment,
verification on) and differs in one way: the verified TLS transport is built when the first https request needs
it. Plain http goes through a transport whose TLS context verifies but trusts no CA, so if it were ever handed an
https URL it would fail closed, never connect unverified.

It is installed only over huggingface_hub's own default factory: a factory the application set (proxies,
custom CAs) is left alone.
"""

from __future__ import annotations

import ssl
import threading

_installed = False
_install_lock = threading.Lock()


def _transport_class():
    import httpx2

    class LazyTLSTransport(httpx2.BaseTransport):
        """http:// through a TLS-less pool; https:// through httpx2's default (verified) transport, built lazily."""

        def __init__(self):
            closed_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verify + check_hostname on, no CA: fails closed
            self._plain = httpx2.HTTPTransport(verify=closed_ctx)
            self._tls = None
            self._lock = threading.Lock()

        def _tls_transport(self):
            if self._tls is None:
                with self._lock:
                    if self._tls is None:
                        self._tls = httpx2.HTTPTransport()  # exactly what httpx2.Client() would have built
            return self._tls

        def handle_request(self, request):
            transport = self._plain if request.url.scheme == "http" else self._tls_transport()
            return transport.handle_request(request)

        def close(self) -> None:
            self._plain.close()
            if self._tls is not None:
                self._tls.close()

    return LazyTLSTransport


def _client_factory():
    import httpx2
    from huggingface_hub.utils._http import hf_request_event_hook

    # The same arguments as huggingface_hub's default_client_factory, plus the transport.
    return httpx2.Client(
        event_hooks={"request": [hf_request_event_hook]},
        follow_redirects=True,
        timeout=None,
        transport=_transport_class()(),
    )


def install() -> None:
    """Use the lazy-TLS factory for huggingface_hub's shared session, unless the application set its own."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from huggingface_hub import set_client_factory
        from huggingface_hub.utils import _http

        # _GLOBAL_CLIENT_FACTORY is private, but it is the only way to tell the default from an application's choice.
        if getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is _http.default_client_factory:
            set_client_factory(_client_factory)
        _installed = True
