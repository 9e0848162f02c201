"""huggingface_hub's exceptions, turned into the project's: every Hub failure reaches the user as a
``KernelHubError`` subclass naming the repo, the revision, what was being done, and what to do about it.

``huggingface_hub`` raises ``HfHubHTTPError`` (and subclasses) for HTTP statuses and httpx's ``TransportError``
when nothing answers. Both are translated at the boundary, in one place, so that no caller shows a raw 401 or 412
and no message forgets the advice. huggingface_hub is imported only when an exception is being translated: the
cache-only paths never import it.
"""

from __future__ import annotations

from contextlib import contextmanager

from hub_client.errors import (
    AuthenticationError,
    HubRequestError,
    HubUnreachableError,
    KernelHubError,
    NotFoundError,
    PublishRefusedError,
)
from hub_client.settings import HubSettings


def transport_errors() -> tuple[type[BaseException], ...]:
    import httpx2  # huggingface_hub's HTTP transport: what it raises when a connection fails or is cut

    return (httpx2.TransportError, ConnectionError, TimeoutError)


def _server_message(e) -> str:
    message = getattr(e, "server_message", None) or ""
    return " ".join(message.split())[:300]  # one line; a hostile server cannot flood the terminal


def _where(settings: HubSettings, repo_id: str, revision: str | None) -> str:
    if revision and not revision.startswith("version "):
        revision = f"revision {revision}"
    return f"{repo_id}{f' {revision}' if revision else ''} at {settings.endpoint}"


def _token_advice(settings: HubSettings, status: int, doing: str, repo_id: str) -> str:
    org = repo_id.split("/")[0]
    if status == 403:
        return f"the token is valid but may not {doing}; use a token with write access to {org!r}"
    if settings.token is None:
        return f"HF_TOKEN is not set; set it to a token for {settings.endpoint} that may {doing}"
    return (f"HF_TOKEN is set but the server refused it (wrong or expired); set HF_TOKEN to a valid token for "
            f"{settings.endpoint}, or unset it to read public repos anonymously")  # fmt: skip


def translate(e: BaseException, settings: HubSettings, repo_id: str, revision: str | None,
              doing: str) -> KernelHubError | None:  # fmt: skip
    """The project's error for a huggingface_hub or transport exception, or None if ``e`` is neither."""
    where = _where(settings, repo_id, revision)
    if isinstance(e, transport_errors()):
        return HubUnreachableError(
            f"{where}: cannot {doing}: the Hub does not answer ({type(e).__name__}: {e}). Check the network and "
            f"HF_ENDPOINT, then retry; to use only what is cached, set HF_HUB_OFFLINE=1",
            repo_id=repo_id, revision=revision,
        )  # fmt: skip
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )  # fmt: skip

    if not isinstance(e, HfHubHTTPError):
        return None
    status = getattr(getattr(e, "response", None), "status_code", None)
    said = _server_message(e)
    said = f", the server says: {said}" if said else ""
    if isinstance(e, RepositoryNotFoundError):
        return NotFoundError(
            f"no kernel repo {repo_id!r} at {settings.endpoint}, or it is private and "
            f"{'no HF_TOKEN is set' if settings.token is None else 'HF_TOKEN may not read it'}; check the name, "
            f"or set HF_TOKEN to a token that can read it"
        )
    if isinstance(e, RevisionNotFoundError):
        return NotFoundError(f"{where}: no such revision; `nki-kernels versions {repo_id}` lists the releases")
    if isinstance(e, EntryNotFoundError):
        return NotFoundError(f"{where}: a file is missing{said}; the release is incomplete, ask its publisher")
    if status in (401, 403):
        return AuthenticationError(
            f"{where}: cannot {doing}: {status} {'unauthorised' if status == 401 else 'forbidden'}{said}; "
            f"{_token_advice(settings, status, doing, repo_id)}",
            repo_id=repo_id, revision=revision, status=status,
        )  # fmt: skip
    if status == 412 or (status == 409 and "publish" in doing):
        return PublishRefusedError(
            f"{where}: cannot {doing}: another publisher changed the repo first ({status}{said}); nothing of this "
            f"publish was kept. Run `nki-kernels versions {repo_id}` to see what won, then publish a newer version"
        )
    if status in (429, 503):
        retry = getattr(e.response, "headers", {}).get("Retry-After")
        return HubRequestError(
            f"{where}: cannot {doing}: the Hub is busy ({status}{said}); retry "
            f"{f'after {retry} s' if retry else 'in a moment'}", repo_id=repo_id, revision=revision, status=status,
        )  # fmt: skip
    if status == 413:
        return HubRequestError(f"{where}: cannot {doing}: the request is larger than the Hub accepts (413{said})",
                               repo_id=repo_id, revision=revision, status=status)  # fmt: skip
    advice = "retry later; if it persists, report it with the server's message" if (status or 0) >= 500 else (
        "the request was refused as sent; this is a bug in hub_client or the server, report it with this message")
    return HubRequestError(f"{where}: cannot {doing}: HTTP {status}{said}; {advice}", repo_id=repo_id,
                           revision=revision, status=status)  # fmt: skip


@contextmanager
def hub_call(settings: HubSettings, repo_id: str, revision: str | None, doing: str):
    """Run huggingface_hub calls; their HTTP and connection failures leave as the project's errors."""
    try:
        yield
    except KernelHubError:
        raise
    except Exception as e:
        translated = translate(e, settings, repo_id, revision, doing)
        if translated is None:
            raise
        raise translated from None
