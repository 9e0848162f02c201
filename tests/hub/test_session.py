"""The huggingface_hub client factory hub_client installs: TLS built lazily, never weakened, never imposed."""

import ssl

import huggingface_hub
from huggingface_hub.utils import _http

from hub_client import session


def test_plain_http_transport_cannot_talk_tls_unverified():
    transport = session._transport_class()()
    ctx = transport._plain._pool._ssl_context
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == 0  # trusts no CA: any TLS through it fails closed
    assert transport._tls is None  # no CA bundle loaded until an https request needs it
    tls = transport._tls_transport()._pool._ssl_context
    assert tls.verify_mode == ssl.CERT_REQUIRED and tls.cert_store_stats()["x509_ca"] > 0
    transport.close()


def test_install_replaces_only_the_default_factory(monkeypatch):
    monkeypatch.setattr(session, "_installed", False)
    def mine():  # an application's own factory (custom CAs, proxies)
        return _http.default_client_factory()

    monkeypatch.setattr(_http, "_GLOBAL_CLIENT_FACTORY", mine)
    session.install()
    assert _http._GLOBAL_CLIENT_FACTORY is mine
    monkeypatch.setattr(session, "_installed", False)
    monkeypatch.setattr(_http, "_GLOBAL_CLIENT_FACTORY", _http.default_client_factory)
    session.install()
    assert _http._GLOBAL_CLIENT_FACTORY is session._client_factory
    client = huggingface_hub.get_session()
    assert client.follow_redirects and type(client._transport).__name__ == "LazyTLSTransport"
