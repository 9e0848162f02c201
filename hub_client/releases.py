"""Releases are immutable from the client's side too: trust on first use, as SSH does for host keys.

The first fetch of a release tag records (tag, commit, manifest digest) in the repo's cache
(``<repo cache>/kernel-releases.json``, per endpoint). A later fetch that finds the same tag on another commit, or
the same commit with another manifest, is refused with both values before any file of it but the manifest is
downloaded: a release rewritten in place on the server (every digest consistent, so nothing else notices), or a
server that is not the one the cache first talked to. Commits are checked even without a tag: a commit is content
addressed, so one commit with two manifests means a lying server.

Writes are read-modify-write under a file lock and atomic, like the rest of the cache, so concurrent first
fetches agree (the second finds the first's record and is checked against it). A lock file pins commit and digest
explicitly and is not subject to this record; ``nki-kernels forget REPO TAG`` removes one record when a publisher
confirms a re-release.
"""

from __future__ import annotations

import json
from pathlib import Path

from hub_client.atomic import record_lock, write_json
from hub_client.errors import KernelHubError, ReleaseChangedError
from hub_client.settings import HubSettings

RECORD = "kernel-releases.json"


def _path(settings: HubSettings, repo_id: str) -> Path:
    return settings.repo_cache(repo_id) / RECORD


def _well_formed(data) -> bool:
    """endpoint -> tag -> {"commit": str, "digest": str}, exactly what ``remember`` writes."""
    return isinstance(data, dict) and all(
        isinstance(entries, dict) and all(
            isinstance(entry, dict) and isinstance(entry.get("commit"), str) and isinstance(entry.get("digest"), str)
            for entry in entries.values())
        for entries in data.values()
    )  # fmt: skip


def _read_all(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    if not _well_formed(data):
        # Written atomically by this module only, so a bad file was damaged from outside; starting over would
        # silently forget every release, so refuse until someone looks.
        raise KernelHubError(
            f"{path}: the record of first-fetched releases is damaged (not what kernels writes); inspect it, and "
            f"delete it only if you accept trusting every release of this repo anew on its next fetch"
        )
    return data


def recorded(settings: HubSettings, repo_id: str) -> dict[str, dict]:
    """tag -> {"commit", "digest"} as first fetched from this endpoint."""
    return _read_all(_path(settings, repo_id)).get(settings.endpoint, {})


def _refusal(settings, repo_id, tag: str, old: dict, commit: str, digest: str) -> ReleaseChangedError:
    return ReleaseChangedError(
        f"{repo_id} {tag} at {settings.endpoint} is not the release this cache first fetched:\n"
        f"  first fetched: commit {old['commit']}, manifest sha256:{old['digest']}\n"
        f"  now:           commit {commit}, manifest sha256:{digest}\n"
        f"Releases are immutable, so the release was rewritten on the server, or this is not the server it was. "
        f"Nothing of it was used. To keep what you had, pin it: get_kernel({repo_id!r}, revision={old['commit']!r}) "
        f"or a kernels.lock. If the publisher confirms the re-release, run `nki-kernels forget {repo_id} {tag}` and "
        f"retry.",
        repo_id=repo_id, tag=tag, recorded=dict(old), found={"commit": commit, "digest": digest},
    )  # fmt: skip


def _conflict(entries: dict, settings, repo_id, tag, commit, digest) -> ReleaseChangedError | None:
    """The refusal if (tag, commit, digest) contradicts a record: the tag on another commit or manifest, or the
    commit (under any tag) with another manifest."""
    old = entries.get(tag) if tag is not None else None
    if old is not None and (old["commit"], old["digest"]) != (commit, digest):
        return _refusal(settings, repo_id, tag, old, commit, digest)
    for other_tag, other in entries.items():
        if other["commit"] == commit and other["digest"] != digest:
            return _refusal(settings, repo_id, other_tag, other, commit, digest)
    return None


def check(settings: HubSettings, repo_id: str, tag: str | None, commit: str, digest: str) -> bool:
    """Raise ReleaseChangedError if (tag, commit, digest) contradicts what was first fetched. True if the tag is
    already recorded (nothing to remember), False if this is its first use (or there is no tag)."""
    entries = recorded(settings, repo_id)
    refusal = _conflict(entries, settings, repo_id, tag, commit, digest)
    if refusal is not None:
        raise refusal
    return tag is None or tag in entries


def remember(settings: HubSettings, repo_id: str, tag: str, commit: str, digest: str) -> None:
    """Record a first fetch; a concurrent first fetch of the same tag that saw something else is refused."""
    path = _path(settings, repo_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with record_lock(path):
        data = _read_all(path)
        entries = data.setdefault(settings.endpoint, {})
        refusal = _conflict(entries, settings, repo_id, tag, commit, digest)
        if refusal is not None:
            raise refusal
        if tag in entries:
            return
        entries[tag] = {"commit": commit, "digest": digest}
        write_json(path, data)


class FirstUse:
    """One fetch's part in the record: ``check`` is the fetch's ``on_manifest`` (refuses before any other file is
    fetched), ``record`` runs once the release is verified and remembers it if this was its first use."""

    def __init__(self, settings: HubSettings, repo_id: str, tag: str | None, commit: str):
        self.settings, self.repo_id, self.tag, self.commit = settings, repo_id, tag, commit
        self.known: bool | None = None

    def check(self, manifest) -> None:
        self.known = check(self.settings, self.repo_id, self.tag, self.commit, manifest.digest)

    def record(self, manifest) -> None:
        if self.tag is not None and self.known is False:
            remember(self.settings, self.repo_id, self.tag, self.commit, manifest.digest)


def forget(settings: HubSettings, repo_id: str, tag: str) -> dict | None:
    """Remove one record (``tag`` may also be a recorded commit); returns what was removed, or None."""
    path = _path(settings, repo_id)
    if not path.is_file():
        return None
    with record_lock(path):
        data = _read_all(path)
        entries = data.get(settings.endpoint, {})
        names = [t for t, e in entries.items() if tag in (t, e["commit"])]
        if not names:
            return None
        removed = {t: entries.pop(t) for t in names}
        write_json(path, data)
    return removed
