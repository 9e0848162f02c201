"""Project-level operations on ``kernels.lock``: lock a project's declared kernels, pre-fetch what a lock names."""

from __future__ import annotations

import warnings
from pathlib import Path

from hub_client import publishers, releases, resolve, versions
from hub_client.errors import ReleaseChangedError
from hub_client.fetch import Fetched, fetch
from hub_client.lockfile import LOCK_NAME, Locked, dependencies, read_lock, write_lock
from hub_client.settings import HubSettings


def lock_project(project_dir: str | Path, settings: HubSettings | None = None) -> list[Locked]:
    settings = settings or HubSettings.from_env()
    entries = []
    for repo_id, major in dependencies(project_dir).items():
        resolved = resolve.resolve_online(settings, repo_id, major, None)  # the head of v<major>, as HF locks it
        tag = versions.tag_name(resolved.version) if resolved.version else None
        first = releases.FirstUse(settings, repo_id, tag, resolved.commit)
        fetched = fetch(settings, repo_id, resolved.commit, lambda m: [], local_only=False, on_manifest=first.check)
        first.record(fetched.manifest)
        entries.append(Locked(repo_id, major, resolved.commit, tag, fetched.manifest.digest))
    write_lock(Path(project_dir) / LOCK_NAME, entries)
    return entries


def download_project(project_dir: str | Path, settings: HubSettings | None = None, progress=None) -> dict[str, Fetched]:
    """Fetch every file of every locked release into the cache, each checked against the locked digests, and record
    what the lock resolves so the calls it covers work offline: ``get_kernel(version=N)`` and
    ``get_kernel(revision=<tag>)`` for the locked major and tag, and ``nki-kernels verify --version N``."""
    settings = settings or HubSettings.from_env()
    out = {}
    for repo_id, e in read_lock(Path(project_dir) / LOCK_NAME).items():
        out[repo_id] = fetch(settings, repo_id, e.commit, lambda m: sorted(m.files), local_only=settings.offline,
                             manifest_digest=e.digest, progress=progress)  # fmt: skip
        # Record the publisher's trust status too, so loading offline later decides as it would online.
        publishers.is_trusted_publisher(settings, repo_id, online=not settings.offline, revalidate=True)
        _record_locked(settings, e, out[repo_id].manifest.version)
    return out


def _record_locked(settings: HubSettings, e: Locked, version: str) -> None:
    if e.tag is None or e.digest is None or e.version is None or versions.parse_tag(e.tag) is None or (
            e.tag != versions.tag_name(version)):  # fmt: skip
        return  # the lock names no release tag (or one its manifest contradicts): only the commit pin applies
    resolved = resolve.Resolved(e.repo_id, e.commit, e.tag, version)
    recorded = resolve.read_recorded(settings, e.repo_id).get(resolve.request_key(e.version, None))
    newer_known = recorded is not None and versions.parse_tag(recorded.get("label") or "") is not None and (
        versions.parse_tag(recorded["label"]) > versions.parse_tag(e.tag))  # fmt: skip
    if int(version.split(".")[0]) == e.version and not newer_known:
        resolve.record(settings, resolved, e.version, None)  # an online call since saw a newer release: keep it
    resolve.record(settings, resolved, None, e.tag)
    # The lock is a first use of its release as much as a fetch is: a later unpinned fetch is held to it. A cache
    # that first saw something else keeps its record (the lock still pins its own loads) and says so.
    try:
        if not releases.check(settings, e.repo_id, e.tag, e.commit, e.digest):
            releases.remember(settings, e.repo_id, e.tag, e.commit, e.digest)
    except ReleaseChangedError as changed:
        warnings.warn(f"kernels.lock and this cache disagree about a release: {changed}", stacklevel=3)
