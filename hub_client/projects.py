"""Project-level operations on ``kernels.lock``: lock a project's declared kernels, pre-fetch what a lock names."""

from __future__ import annotations

from pathlib import Path

from hub_client import publishers, resolve
from hub_client.fetch import Fetched, fetch
from hub_client.lockfile import LOCK_NAME, Locked, dependencies, read_lock, write_lock
from hub_client.settings import HubSettings


def lock_project(project_dir: str | Path, settings: HubSettings | None = None) -> list[Locked]:
    settings = settings or HubSettings.from_env()
    entries = []
    for repo_id, major in dependencies(project_dir).items():
        resolved = resolve.resolve_online(settings, repo_id, major, None)
        fetched = fetch(settings, repo_id, resolved.commit, lambda m: [], local_only=False)
        entries.append(Locked(repo_id, major, resolved.commit, resolved.label, fetched.manifest.digest))
    write_lock(Path(project_dir) / LOCK_NAME, entries)
    return entries


def download_project(project_dir: str | Path, settings: HubSettings | None = None, progress=None) -> dict[str, Fetched]:
    """Fetch every file of every locked release into the cache, each checked against the locked digests."""
    settings = settings or HubSettings.from_env()
    out = {}
    for repo_id, e in read_lock(Path(project_dir) / LOCK_NAME).items():
        out[repo_id] = fetch(settings, repo_id, e.commit, lambda m: sorted(m.files), local_only=settings.offline,
                             manifest_digest=e.digest, progress=progress)  # fmt: skip
        # Record the publisher's trust status too, so loading offline later decides as it would online.
        publishers.is_trusted_publisher(settings, repo_id, online=not settings.offline, revalidate=True)
    return out
