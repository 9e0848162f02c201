"""Who may do what: bearer tokens configured on the server, each granting read or write access.

The registry is single-tenant: a write token may write every repo, any valid token may read private repos.
Anonymous requests may read public repos only. Refusals follow the Hub, because huggingface_hub decides what
exception to raise from them: an unknown token is a 401 with the exact `BAD_CREDENTIALS` message; an anonymous
request for a private repo gets exactly the 404 `RepoNotFound` an absent repo gets (same status, headers and body,
so a stranger cannot tell private from absent; huggingface_hub raises RepositoryNotFoundError for both); an
anonymous write is a 401 before the repo is even looked up; a read-only token that writes gets a 403.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import BAD_CREDENTIALS, HubError, repo_not_found


@dataclass(frozen=True)
class Identity:
    user: str
    can_write: bool


ANONYMOUS = Identity("anonymous", can_write=False)


class TokenTable:
    """Tokens -> identities. Accepts an iterable of write tokens, or a mapping token -> "read" | "write"."""

    def __init__(self, tokens: Iterable[str] | Mapping[str, str] | None = None):
        if tokens is None:
            tokens = {}
        if isinstance(tokens, str):
            tokens = [tokens]
        grants = tokens if isinstance(tokens, Mapping) else dict.fromkeys(tokens, "write")
        self._grants: list[tuple[bytes, Identity]] = []
        for number, (token, role) in enumerate(grants.items(), 1):
            if role not in ("read", "write"):
                raise ValueError(f"token role must be 'read' or 'write', got {role!r}")
            if not token:
                raise ValueError("empty token")
            self._grants.append((token.encode(), Identity(f"user{number}", role == "write")))

    def identify(self, authorization: str | None) -> Identity:
        """The identity behind an `Authorization` header; a present but unknown token is refused outright."""
        if not authorization:
            return ANONYMOUS
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HubError(401, BAD_CREDENTIALS)
        presented = token.strip().encode()
        found = None
        for known, identity in self._grants:
            # Compare against every token in constant time, so timing does not reveal a token's prefix.
            if hmac.compare_digest(presented, known):
                found = identity
        if found is None:
            raise HubError(401, BAD_CREDENTIALS)
        return found


def require_write(identity: Identity) -> None:
    if identity is ANONYMOUS:
        raise HubError(401, "Authorization required: writing needs a bearer token with write access", "Unauthorized")
    if not identity.can_write:
        raise HubError(403, "This token has read access only; writing needs a write token", "Forbidden")


def require_read(identity: Identity, private: bool, repo_id: str) -> None:
    if private and identity is ANONYMOUS:
        # The very answer a missing repo gets: anonymous callers learn nothing about private repos.
        raise repo_not_found(repo_id)
