"""The loading entry points behind the ``kernels`` facade: resolve, fetch (verified), load.

Environment is read once per call (``HubSettings.from_env``); everything below takes it explicitly.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import warnings
from pathlib import Path

from hub_client import backends, publishers, releases, resolve, versions
from hub_client.errors import (
    BundleError,
    DigestMismatchError,
    HubUnreachableError,
    LockError,
    NotFoundError,
    OfflineError,
)
from hub_client.fetch import fetch
from hub_client.loader import LoadedKernel, load
from hub_client.lockfile import LOCK_NAME, Locked, read_lock
from hub_client.manifest import MANIFEST, Manifest, parse, sha256_hex
from hub_client.settings import HubSettings

_LOADED: dict[tuple, LoadedKernel] = {}  # (repo, commit, digest, trusted, backend) -> the loaded kernel
# A successful online resolution is reused by the same request in this process for RESOLVE_TTL_S seconds: a warm
# get_kernel then costs no round trip, and code that asks twice in quick succession gets the same release.
RESOLVE_TTL_S = 60.0
_RESOLVED: dict[tuple, tuple[float, resolve.Resolved]] = {}


def clear_memo() -> None:
    """Forget loaded kernels and recent resolutions (tests and long-running tools that want a cold state)."""
    _LOADED.clear()
    _RESOLVED.clear()


def is_trusted(repo_id: str, trust_remote_code) -> bool:
    """The caller's own allow-list: True trusts every repo, a list trusts the repo ids in it."""
    if isinstance(trust_remote_code, bool):
        return trust_remote_code
    if isinstance(trust_remote_code, list | tuple | set | frozenset):
        return repo_id in trust_remote_code
    raise TypeError(f"trust_remote_code must be a bool or a list of repo ids, got {type(trust_remote_code).__name__}")


def _settings(user_agent=None) -> HubSettings:
    if user_agent is not None and not isinstance(user_agent, str | dict):
        raise TypeError(f"user_agent must be a string or a dict, got {type(user_agent).__name__}")
    settings = HubSettings.from_env()
    return settings if user_agent is None else dataclasses.replace(settings, user_agent=user_agent)


def _needed(trusted: bool):
    return lambda m: m.ir_files() + (list(m.python_files) if trusted else [])


def _resolve(settings, repo_id, version, revision, local_only):
    """(resolved, cache_only, online): cache_only means files must come from the cache (offline or asked to);
    online means the refs were just read from the Hub (the resolution is worth recording once it loads)."""
    if settings.offline or local_only:
        return resolve.resolve_offline(settings, repo_id, version, revision), True, False
    if resolve.is_cached_commit(settings, repo_id, revision):
        # A pinned commit needs no round trip; files it lacks (e.g. the source, on a first trusted load) are still
        # downloaded by commit.
        return resolve.resolve_offline(settings, repo_id, version, revision), False, False
    try:
        resolved = resolve.resolve_online(settings, repo_id, version, revision)
    except HubUnreachableError as e:
        # The Hub is unreachable: fall back to what an earlier call recorded, as huggingface_hub does for files.
        try:
            resolved = resolve.resolve_offline(settings, repo_id, version, revision)
        except OfflineError as cached:
            raise OfflineError(f"{e}. The cache cannot stand in: {cached}") from None
        warnings.warn(f"{settings.endpoint} unreachable; using cached {repo_id} {resolved.label}", stacklevel=3)
        return resolved, True, False
    return resolved, False, True


def _first_use(settings, repo_id, commit, tag_version) -> releases.FirstUse:
    return releases.FirstUse(settings, repo_id, versions.tag_name(tag_version) if tag_version else None, commit)


def _trust(settings, repo_id, trust_remote_code, *, online: bool, revalidate: bool) -> str | None:
    """Why the published Python may run (None: it may not): the caller's allow-list first, then the publisher."""
    if is_trusted(repo_id, trust_remote_code):
        return "trust_remote_code"
    if publishers.is_trusted_publisher(settings, repo_id, online=online, revalidate=revalidate):
        return f"trusted publisher {repo_id.split('/')[0]}"
    return None


def _load_release(settings, repo_id, commit, label, tag_version, *, trusted_by, backend, local_only,
                  manifest_digest=None, progress=None) -> LoadedKernel:  # fmt: skip
    trusted = trusted_by is not None
    # A lock file pins commit and digest itself; everything else is held to what the cache first fetched.
    first = _first_use(settings, repo_id, commit, tag_version) if manifest_digest is None else None
    fetched = fetch(settings, repo_id, commit, _needed(trusted), local_only=local_only,
                    manifest_digest=manifest_digest, progress=progress, on_manifest=first and first.check)  # fmt: skip
    manifest = fetched.manifest
    if tag_version is not None and tag_version != manifest.version:
        raise BundleError(f"{repo_id}: tag v{tag_version} holds a manifest for version {manifest.version}")
    if first is not None:
        first.record(manifest)
    key = (repo_id, commit, manifest.digest, trusted_by, backend)
    loaded = _LOADED.get(key)
    if loaded is None:
        loaded = load(fetched.snapshot, manifest, repo_id=repo_id, revision=label, commit=commit, trusted=trusted,
                      backend=backend, trusted_by=trusted_by)  # fmt: skip
        _LOADED[key] = loaded
    return loaded


def get_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, backend: str | None = None,
               user_agent: str | dict | None = None, trust_remote_code: bool | list[str] = False,
               check_arch: bool = True, local_files_only: bool = False, progress=None) -> LoadedKernel:  # fmt: skip
    """HF kernels' ``get_kernel`` signature (``check_arch`` is accepted: IR has no compiled architecture to check),
    plus ``local_files_only`` and ``progress``. ``version=N`` is the head of branch ``vN``; ``backend`` takes this
    project's names or HF's (``backends``)."""
    backend = backends.project_backend(backend)
    settings = _settings(user_agent)
    is_trusted(repo_id, trust_remote_code)  # a malformed allow-list is refused before any request
    memo_key = (settings.endpoint, settings.cache_dir, repo_id, resolve.request_key(version, revision),
                _allow_key(trust_remote_code))  # fmt: skip
    recent = _RESOLVED.get(memo_key)
    online = not (settings.offline or local_files_only)
    fresh = recent is not None and online and time.monotonic() - recent[0] < RESOLVE_TTL_S
    if fresh:
        (resolved, trusted_by), local = recent[1], False
    else:
        pinned = online and resolve.is_cached_commit(settings, repo_id, revision)
        resolved, local, asked = _resolve(settings, repo_id, version, revision, local_files_only)
        # A version or branch resolved online re-asks about the publisher too; a cached commit uses what is recorded.
        trusted_by = _trust(settings, repo_id, trust_remote_code, online=not local, revalidate=not pinned)
    loaded = _load_release(settings, repo_id, resolved.commit, resolved.label, resolved.version,
                           trusted_by=trusted_by, backend=backend, local_only=local, progress=progress)  # fmt: skip
    if not fresh and asked:
        resolve.record(settings, resolved, version, revision)  # only a resolution that loaded is offered offline
    if not local and not fresh:
        _RESOLVED[memo_key] = (time.monotonic(), (resolved, trusted_by))  # only after the release loaded and verified
    return loaded


def _allow_key(trust_remote_code) -> object:
    return trust_remote_code if isinstance(trust_remote_code, bool) else tuple(sorted(trust_remote_code))


def has_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, backend: str | None = None,
               trust_remote_code: bool | list[str] = False, check_arch: bool = True) -> bool:  # fmt: skip
    """Whether the release resolves and its manifest is available and well formed (nothing is executed). A release
    rewritten since this cache first fetched it is not an absence: ReleaseChangedError is raised, as by get_kernel.
    HF's signature; ``trust_remote_code`` is checked for form (nothing runs, so it changes nothing)."""
    backends.project_backend(backend)
    is_trusted(repo_id, trust_remote_code)
    settings = HubSettings.from_env()
    try:
        resolved, local, _ = _resolve(settings, repo_id, version, revision, False)
        first = _first_use(settings, repo_id, resolved.commit, resolved.version)
        fetched = fetch(settings, repo_id, resolved.commit, lambda m: [], local_only=local, on_manifest=first.check)
    except (NotFoundError, OfflineError, BundleError, DigestMismatchError):
        return False  # a rewritten release (ReleaseChangedError) is not an absence: it is raised
    first.record(fetched.manifest)
    return True


def _lock_entry(repo_id: str, lockfile) -> Locked:
    path = Path(lockfile) if lockfile is not None else Path.cwd() / LOCK_NAME
    entries = read_lock(path)
    if repo_id not in entries:
        raise LockError(f"{path}: {repo_id} is not locked; locked: {', '.join(entries) or 'nothing'}")
    return entries[repo_id]


def get_locked_kernel(
    repo_id: str,
    *,
    lockfile=None,
    trust_remote_code: bool | list[str] = False,
    user_agent: str | dict | None = None,
    backend: str | None = None,
    local_files_only: bool = False,
) -> LoadedKernel:
    """The release ``kernels.lock`` pins (commit, and the manifest digest when the lock's sidecar has it: a lock HF
    wrote pins the commit only, and every file is still checked against that commit's manifest); downloads it if
    needed."""
    backend = backends.project_backend(backend)
    entry = _lock_entry(repo_id, lockfile)
    settings = _settings(user_agent)
    local = settings.offline or local_files_only
    trusted_by = _trust(settings, repo_id, trust_remote_code, online=not local, revalidate=False)
    return _load_release(settings, repo_id, entry.commit, entry.tag or entry.commit, None, trusted_by=trusted_by,
                         backend=backend, local_only=local, manifest_digest=entry.digest)  # fmt: skip


def load_kernel(
    repo_id: str, *, lockfile=None, backend: str | None = None, trust_remote_code: bool | list[str] = False
) -> LoadedKernel:
    """Like get_locked_kernel, from the cache only: never touches the network."""
    return get_locked_kernel(repo_id, lockfile=lockfile, backend=backend, trust_remote_code=trust_remote_code,
                             local_files_only=True)  # fmt: skip


def _verify_dir(root: Path, manifest: Manifest, rels: list[str]) -> None:
    for rel in rels:
        path = root / rel
        if not path.is_file():
            raise BundleError(f"{root}: the manifest names {rel!r}, which is missing")
        actual = sha256_hex(path.read_bytes())
        if actual != manifest.files[rel]:
            raise DigestMismatchError(rel, manifest.files[rel], actual, str(root), removed=False)


def get_local_kernel(repo_path, *, backend: str | None = None, trust_remote_code: bool = False,
                     user_agent: str | dict | None = None) -> LoadedKernel:  # fmt: skip
    """A kernel from a local bundle directory (``manifest.json``) or a kernel package (``kernel.toml``, built into
    a bundle first). The same checks and trust rules as a download apply. HF's signature (``user_agent`` is
    accepted; nothing is requested)."""
    backend = backends.project_backend(backend)
    path = repo_path
    root = Path(path).resolve()
    if not (root / MANIFEST).is_file():
        if not (root / "kernel.toml").is_file():
            raise BundleError(f"{root}: neither a bundle (manifest.json) nor a kernel package (kernel.toml)")
        from hub_client.bundle import build_bundle

        root = build_bundle(root, benchmarks=False).write(tempfile.mkdtemp(prefix="kernels-local-"))
    manifest = parse((root / MANIFEST).read_bytes())
    trusted = bool(trust_remote_code)  # a local directory has no publisher: only the caller can trust it
    _verify_dir(root, manifest, _needed(trusted)(manifest))
    return load(root, manifest, repo_id=f"local:{manifest.name}", revision=str(root), commit=None, trusted=trusted,
                backend=backend)  # fmt: skip


def install_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None,
                   backend: str | None = None, local_files_only: bool = False, user_agent: str | dict | None = None,
                   trust_remote_code: bool | list[str] = False) -> Path:  # fmt: skip
    """HF's ``install_kernel``: download a release into the cache without loading it, and return where it is (the
    snapshot directory; HF returns its variant directory). Every file is checked against the manifest, the release
    against the first-use record, as by ``get_kernel``; the published Python is fetched only if it may run."""
    backends.project_backend(backend)
    settings = _settings(user_agent)
    is_trusted(repo_id, trust_remote_code)
    resolved, local, asked = _resolve(settings, repo_id, version, revision, local_files_only)
    trusted_by = _trust(settings, repo_id, trust_remote_code, online=not local, revalidate=not local)
    first = _first_use(settings, repo_id, resolved.commit, resolved.version)
    fetched = fetch(settings, repo_id, resolved.commit, _needed(trusted_by is not None), local_only=local,
                    on_manifest=first.check)  # fmt: skip
    first.record(fetched.manifest)
    if asked:
        resolve.record(settings, resolved, version, revision)
    return fetched.snapshot
