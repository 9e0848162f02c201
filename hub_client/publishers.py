"""Trusted publishers: organisations whose published Python may be imported without ``trust_remote_code``.

As in HF ``kernels`` (reference/hub.md §1.10), the Hub says which organisations are trusted: the organisation
overview (``HfApi.get_organization_overview``) carries ``trustedKernelPublisher``; the caller's own allow-list is
``trust_remote_code`` (``True`` for every repo, or a list of repo ids) and is checked first, in ``api``.

Unlike HF ``kernels``, which skips the check offline and so imports remote code unchecked, an answer is recorded
in the repo's cache (``kernel-publisher.json``, per endpoint, written atomically) and offline only a recorded
"trusted" counts; anything else is not trusted, which here means the verified IR runs and no remote Python does.
An overview that cannot be read (404: no such organisation, or an error) is not trusted either.
"""

from __future__ import annotations

import json
import warnings

from hub_client.atomic import write_text
from hub_client.settings import HubSettings

RECORD = "kernel-publisher.json"


def _record_path(settings: HubSettings, repo_id: str):
    return settings.repo_cache(repo_id) / RECORD


def recorded(settings: HubSettings, repo_id: str) -> bool | None:
    """What the last online check of this repo's publisher said at this endpoint, or None if never checked."""
    try:
        data = json.loads(_record_path(settings, repo_id).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if data.get("endpoint") != settings.endpoint or data.get("org") != repo_id.split("/")[0]:
        return None
    return data.get("trusted") is True


def ask(settings: HubSettings, repo_id: str) -> bool | None:
    """The Hub's answer for the repo's organisation (recorded), or None if the Hub could not be reached."""
    from huggingface_hub.errors import HfHubHTTPError

    from hub_client.hub_errors import transport_errors

    org = repo_id.split("/")[0]
    try:
        trusted = getattr(settings.api().get_organization_overview(org), "trustedKernelPublisher", False) is True
    except transport_errors():
        return None
    except HfHubHTTPError as e:
        status = getattr(e.response, "status_code", None)
        if status != 404:  # 404 is an answer (a user, or no such org); anything else is a failed check
            warnings.warn(f"could not verify the publisher trust status of {org!r} at {settings.endpoint} "
                          f"({status}); its published Python will not be imported", stacklevel=4)  # fmt: skip
            return None
        trusted = False
    if recorded(settings, repo_id) is not trusted:
        path = _record_path(settings, repo_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"endpoint": settings.endpoint, "org": org, "trusted": trusted}) + "\n")
    return trusted


def is_trusted_publisher(settings: HubSettings, repo_id: str, *, online: bool, revalidate: bool) -> bool:
    """Whether the repo's organisation is a trusted publisher.

    ``online`` and ``revalidate``: ask the Hub (a call that resolved a version or branch online does, so a revoked
    publisher is noticed at once). ``online`` alone: ask only if nothing is recorded (pinned commits and lock files
    need no request once their release is cached). Offline: the recorded answer, else not trusted.
    """
    if online and (revalidate or recorded(settings, repo_id) is None):
        answer = ask(settings, repo_id)
        if answer is not None:
            return answer
    return recorded(settings, repo_id) is True
