"""``hub_client.server``'s public names (``__all__``) resolve, the HTTP server's two through the deferred import
(PEP 562 ``__getattr__``: only serving pays for the server's imports), and any other name is an AttributeError."""

import pytest

import hub_client.server as package
from hub_client.server import server


def test_every_public_name_resolves():
    assert {name: getattr(package, name) for name in package.__all__} == {
        "Limits": package.Limits, "RegistryServer": server.RegistryServer, "serve": server.serve}  # fmt: skip


def test_the_registry_server_imports_by_name():
    from hub_client.server import RegistryServer, serve

    assert (RegistryServer, serve) == (server.RegistryServer, server.serve)


def test_another_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="module 'hub_client.server' has no attribute 'Registry'"):
        package.Registry  # noqa: B018
