"""Turn ``version=N`` or ``revision=REF`` into a commit: online from the Hub's refs (list_repo_refs), offline from
what an earlier online call recorded in the cache (``<repo cache>/kernel-refs.json``, written atomically).

huggingface_hub records ``refs/<name>`` only when a download is made by ref name; loading resolves to a commit
first (so every file of one load comes from one commit), hence this small record of its own.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass

from hub_client import versions
from hub_client.atomic import record_lock, write_json
from hub_client.errors import NotFoundError, OfflineError
from hub_client.settings import HubSettings

COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
REFS_FILE = "kernel-refs.json"


@dataclass(frozen=True)
class Resolved:
    repo_id: str
    commit: str
    label: str  # what was resolved, for humans: "v1.2.0", "v1", "main" or the commit
    version: str | None  # the full release version when the commit is a release tag


def request_key(version: int | None, revision: str | None) -> str:
    if (version is None) == (revision is None):
        raise ValueError("give exactly one of version= (a major version, e.g. 1) or revision= (branch, tag or commit)")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be a major version number such as 1, got {version!r}")
        return f"version:{version}"
    return f"revision:{revision}"


def _describe(tags: dict[str, str], branches: dict[str, str]) -> str:
    rel = ", ".join(f"{name} ({commit[:7]})" for _, name, commit in versions.releases(tags)) or "none"
    return f"releases: {rel}; branches: {', '.join(sorted(branches)) or 'none'}"


def refs(settings: HubSettings, repo_id: str, wanted: str | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(branches, tags) of a repo, name -> commit; ``wanted`` (e.g. "version 1") is named in errors."""
    from hub_client.hub_errors import hub_call

    with hub_call(settings, repo_id, wanted, "list its branches and tags"):
        r = settings.api().list_repo_refs(repo_id, repo_type=settings.repo_type)
    return {b.name: b.target_commit for b in r.branches}, {t.name: t.target_commit for t in r.tags}


def resolve_online(settings: HubSettings, repo_id: str, version: int | None, revision: str | None) -> Resolved:
    request_key(version, revision)
    branches, tags = refs(settings, repo_id, f"version {version}" if version is not None else revision)
    by_commit = {c: n for n, c in tags.items() if versions.parse_tag(n)}
    if version is not None:
        return _branch_head(repo_id, version, branches, tags, by_commit)
    commit = _named(revision, branches, tags)
    if commit is None:
        raise NotFoundError(f"{repo_id} has no branch, tag or commit {revision!r}; {_describe(tags, branches)}")
    tag = by_commit.get(commit)
    return Resolved(repo_id, commit, revision, tag[1:] if tag else None)


def _named(revision: str, branches: dict[str, str], tags: dict[str, str]) -> str | None:
    """A branch, then a tag, then a full commit id, as the Hub resolves them; ``refs/heads/<b>`` and
    ``refs/tags/<t>`` (the ``ref`` of list_repo_refs, which HF kernels passes back) name only that ref."""
    if revision.startswith("refs/heads/"):
        return branches.get(revision.removeprefix("refs/heads/"))
    if revision.startswith("refs/tags/"):
        return tags.get(revision.removeprefix("refs/tags/"))
    return branches.get(revision) or tags.get(revision) or (revision if COMMIT.match(revision) else None)


def _branch_head(repo_id, version: int, branches, tags, by_commit) -> Resolved:
    """``version=N`` is the head of branch ``vN``, as HF kernels resolves it. Publishes are linear (each commits on
    the branch, then tags that commit), so the head is the newest release ``vN.x.y``; a head without a tag is a
    publish that has not tagged yet (or stopped before it), which is said, not hidden."""
    branch = versions.branch_name(version)
    commit = branches.get(branch)
    if commit is None:
        raise NotFoundError(f"{repo_id} has no version {version} (no branch {branch}); {_describe(tags, branches)}")
    tag = by_commit.get(commit)
    if tag is None:
        newest = versions.newest(tags, version)
        warnings.warn(
            f"{repo_id} {branch} head {commit[:12]} is not a tagged release (a publish in progress, or one that "
            f"stopped before tagging); loading it as HF kernels does"
            + (f". The newest release is {newest[0]}: pin it with revision={newest[0]!r}" if newest else ""),
            stacklevel=4,
        )
    return Resolved(repo_id, commit, tag or branch, tag[1:] if tag else None)


def _refs_path(settings: HubSettings, repo_id: str):
    return settings.repo_cache(repo_id) / REFS_FILE


def read_recorded(settings: HubSettings, repo_id: str) -> dict:
    try:
        return json.loads(_refs_path(settings, repo_id).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def record(settings: HubSettings, resolved: Resolved, version: int | None, revision: str | None) -> None:
    """Remember what this request resolved to, so the same call works offline (read-modify-write under a lock)."""
    path = _refs_path(settings, resolved.repo_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"commit": resolved.commit, "label": resolved.label, "version": resolved.version}
    with record_lock(path):
        current = read_recorded(settings, resolved.repo_id)
        if current.get(request_key(version, revision)) != entry:
            current[request_key(version, revision)] = entry
            write_json(path, current)


def is_cached_commit(settings: HubSettings, repo_id: str, revision: str | None) -> bool:
    """A full commit id whose manifest is in the cache: a commit never changes, so nothing needs asking."""
    return (
        revision is not None
        and COMMIT.match(revision) is not None
        and (settings.snapshot_dir(repo_id, revision) / "manifest.json").is_file()
    )


def resolve_offline(settings: HubSettings, repo_id: str, version: int | None, revision: str | None) -> Resolved:
    key = request_key(version, revision)
    entry = read_recorded(settings, repo_id).get(key)
    if entry is not None:
        return Resolved(repo_id, entry["commit"], entry["label"], entry.get("version"))
    if revision is not None and COMMIT.match(revision) and settings.snapshot_dir(repo_id, revision).is_dir():
        return Resolved(repo_id, revision, revision, None)
    known = sorted(read_recorded(settings, repo_id))
    what = f"version {version}" if version is not None else f"revision {revision!r}"
    raise OfflineError(
        f"offline: {repo_id} {what} is not in the cache at {settings.cache_dir} "
        f"({'cached requests: ' + ', '.join(known) if known else 'nothing of this repo is cached'}); "
        f"run the same call once online, or `nki-kernels download` a lock file, then retry"
    )
