"""The registry's one error type: an HTTP status plus the Hub's `X-Error-Code` / `X-Error-Message` headers.

`huggingface_hub` turns responses into typed exceptions by reading those two headers (`RepoNotFound`,
`RevisionNotFound`, `EntryNotFound`, and the exact 401 message for a bad token), so every refusal the
server makes goes through `HubError` and the handler renders it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The client singles out this exact message: a 401 carrying it is "your token is wrong", any other 401 on a
# repo URL is reported as "repository not found" (the Hub hides private repos from strangers).
BAD_CREDENTIALS = "Invalid credentials in Authorization header"


@dataclass
class HubError(Exception):
    status: int
    message: str
    code: str | None = None  # X-Error-Code, only for the codes huggingface_hub understands
    headers: dict[str, str] = field(default_factory=dict)  # extra headers, e.g. X-Repo-Commit on EntryNotFound
    extra: dict = field(default_factory=dict)  # extra JSON body fields, e.g. the repo `url` on a create conflict

    def __str__(self) -> str:
        return f"{self.status} {self.code or ''} {self.message}".strip()


def bad_request(message: str) -> HubError:
    return HubError(400, message, "BadRequest")


def repo_not_found(repo_id: str) -> HubError:
    return HubError(404, f"Repository not found: {repo_id}", "RepoNotFound")


def revision_not_found(repo_id: str, revision: str) -> HubError:
    return HubError(404, f"Revision not found: {revision!r} in {repo_id}", "RevisionNotFound")


def entry_not_found(repo_id: str, path: str, commit: str) -> HubError:
    # X-Repo-Commit on a 404 lets the client record a negative cache entry (.no_exist/<commit>/<path>).
    return HubError(404, f"Entry not found: {path!r} in {repo_id}", "EntryNotFound", {"X-Repo-Commit": commit})


def conflict(message: str) -> HubError:
    return HubError(409, message, "Conflict")
