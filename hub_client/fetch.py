"""Download a release's files into the standard Hugging Face cache and check every byte against the manifest.

- Files come through ``hf_hub_download`` pinned to one commit, so the cache layout, ``.incomplete`` temp files,
  resumes and HF_* settings are huggingface_hub's; a file is only ever seen complete in ``snapshots/``.
- Each file's sha256 is checked against the manifest before anything reads it. A mismatch removes the snapshot
  entry and its blob (a retry after the server is fixed downloads afresh) and raises an error naming both digests.
- One process at a time fetches a commit (a file lock); the others wait and then find the files verified.
- A receipt (``kernel-receipts/<commit>.json``: size and mtime of each verified file) lets a warm load skip
  re-hashing; ``verify`` ignores it and re-hashes everything.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from hub_client.atomic import write_json
from hub_client.errors import BundleError, DigestMismatchError, DownloadError, NotFoundError, OfflineError
from hub_client.hub_errors import translate, transport_errors
from hub_client.manifest import MANIFEST, MAX_MANIFEST_BYTES, Manifest, parse, sha256_hex
from hub_client.paths import check_bundle_path
from hub_client.settings import HubSettings


@dataclass
class Fetched:
    snapshot: Path
    manifest: Manifest


def _receipt_path(settings: HubSettings, repo_id: str, commit: str) -> Path:
    return settings.repo_cache(repo_id) / "kernel-receipts" / f"{commit}.json"


def purge(path: Path) -> None:
    """Remove a cached file and the blob it links to: no trace of bad bytes stays in the cache."""
    target = Path(os.path.realpath(path))  # the blob a snapshot entry links to (a plain file: the file itself)
    path.unlink(missing_ok=True)
    target.unlink(missing_ok=True)  # already gone for a plain file, or if another process purged the blob first


def _download(settings, repo_id, commit, rel, local_only) -> Path:
    cached = settings.snapshot_dir(repo_id, commit) / rel
    if cached.is_file():
        # What hf_hub_download itself returns, with no request, for a file already cached under a commit (a commit
        # never changes); checking here first keeps huggingface_hub unimported for cache-only loads.
        return cached
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    where = f"{repo_id}@{commit[:12]}"
    try:
        return Path(hf_hub_download(
            repo_id, rel, repo_type=settings.repo_type, revision=commit, cache_dir=settings.cache_dir,
            endpoint=settings.endpoint, token=settings.token, local_files_only=local_only,
            user_agent=settings.user_agent,
        ))  # fmt: skip
    except transport_errors() as e:  # cut in the middle of a body
        raise DownloadError(f"downloading {rel!r} of {where} from {settings.endpoint} failed: {e}. Nothing partial "
                            f"was kept in the cache; retry when the connection is back") from None  # fmt: skip
    except LocalEntryNotFoundError:  # not cached, and (unless asked not to) the Hub did not answer the HEAD
        if local_only:
            raise OfflineError(
                f"offline: {where} file {rel!r} is not in the cache at {settings.cache_dir}; run the same call once "
                f"online, or `nki-kernels download` a lock file that pins this release"
            ) from None
        raise DownloadError(f"downloading {rel!r} of {where} from {settings.endpoint} failed: the Hub does not "
                            f"answer and the file is not cached; retry when the connection is back") from None
    except EntryNotFoundError:
        raise NotFoundError(f"{where} has no file {rel!r} (a manifest names it); the release is incomplete on "
                            f"{settings.endpoint}, ask its publisher") from None  # fmt: skip
    except Exception as e:
        translated = translate(e, settings, repo_id, commit, f"download {rel!r}")
        if translated is None:
            raise
        raise translated from None


def _check(path: Path, rel: str, expected: str, where: str) -> None:
    with path.open("rb") as f:  # streamed: a file the server sent is hashed without holding it whole in memory
        actual = hashlib.file_digest(f, "sha256").hexdigest()
    if actual != expected:
        purge(path)
        raise DigestMismatchError(rel, expected, actual, where)


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _read_receipt(path: Path, digest: str) -> dict:
    """The receipt's files if it was written for this manifest; anything else (none, damaged, another manifest's)
    counts as no receipt, which only means hashing again."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("manifest") != digest or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def fetch(
    settings: HubSettings, repo_id: str, commit: str, select: Callable[[Manifest], Iterable[str]], *,
    local_only: bool, manifest_digest: str | None = None,
    progress: Callable[[str], None] | None = None, on_manifest: Callable[[Manifest], None] | None = None,
) -> Fetched:  # fmt: skip
    """Fetch ``manifest.json`` and the files ``select(manifest)`` names, verified. ``manifest_digest`` (from a lock
    file) pins the manifest itself; ``on_manifest`` sees the parsed manifest before any other file is fetched (the
    first-use record of releases refuses a rewritten one there)."""
    snapshot = settings.snapshot_dir(repo_id, commit)
    where = f"{repo_id}@{commit[:12]}"
    lock_dir = settings.repo_cache(repo_id) / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_dir / f"kernel-{commit}.lock")):
        manifest_path = _download(settings, repo_id, commit, MANIFEST, local_only)
        size = manifest_path.stat().st_size
        if size > MAX_MANIFEST_BYTES:  # refused before it is read into memory
            purge(manifest_path)
            raise BundleError(f"{where}: manifest.json is {size:,} bytes, more than the "
                              f"{MAX_MANIFEST_BYTES:,} a manifest may have")  # fmt: skip
        data = manifest_path.read_bytes()
        if manifest_digest is not None and sha256_hex(data) != manifest_digest:
            purge(manifest_path)
            raise DigestMismatchError(MANIFEST, manifest_digest, sha256_hex(data), f"{where} (pinned by the lock file)")
        try:
            manifest = parse(data)
        except BundleError:
            purge(manifest_path)  # a bad root must not stick in the cache: the next try downloads it afresh
            raise
        if on_manifest is not None:
            on_manifest(manifest)
        receipt_path = _receipt_path(settings, repo_id, commit)
        receipt = _read_receipt(receipt_path, manifest.digest)
        changed = False
        for rel in select(manifest):
            check_bundle_path(rel)
            local = snapshot / rel
            if rel in receipt and local.is_file() and _stat(local) == receipt[rel]:
                continue  # verified earlier and untouched since
            if progress and not local.is_file():
                progress(rel)  # about to come from the network
            path = _download(settings, repo_id, commit, rel, local_only)
            _check(path, rel, manifest.files[rel], where)
            receipt[rel] = _stat(path)
            changed = True
        if changed:
            write_json(receipt_path, {"manifest": manifest.digest, "files": receipt})
    return Fetched(snapshot, manifest)


def verify_cached(settings: HubSettings, repo_id: str, commit: str) -> tuple[Manifest, list[str]]:
    """Re-hash every cached file of a release (``nki-kernels verify``); returns the manifest and the files checked.
    Raises DigestMismatchError (and purges the bad copy) on the first bad one."""
    snapshot = settings.snapshot_dir(repo_id, commit)
    if not (snapshot / MANIFEST).is_file():
        raise OfflineError(f"{repo_id}@{commit[:12]} is not in the cache at {settings.cache_dir}")
    manifest = parse((snapshot / MANIFEST).read_bytes())
    checked = []
    for rel, digest in sorted(manifest.files.items()):
        if (snapshot / rel).is_file():
            _check(snapshot / rel, rel, digest, f"{repo_id}@{commit[:12]} (cache)")
            checked.append(rel)
    return manifest, checked
