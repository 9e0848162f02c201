"""``kernels.lock``: the kernels a project depends on, pinned to commits, in exactly HF kernels' format, with this
project's bundle digests in a sidecar HF never reads.

A project declares its kernels in ``pyproject.toml`` as HF kernels does (integers are major versions)::

    [tool.kernels.dependencies]
    "acme/softmax" = 1

``kernels lock DIR`` (this project's or HF's: the same input gives the same ``kernels.lock``) resolves each to the
head of its branch ``v<major>`` and writes a JSON list HF kernels 0.17 parses strictly (unknown fields refused)::

    [{"dependency": {"repo-id": "acme/softmax", "version": 1}, "lock": {"commit": "<40 hex>"}}]

This project also writes ``kernels.lock.digests`` beside it: per repo the locked commit, its release tag and the
sha256 of the bundle manifest, which pins every file of the release::

    {"format": "nki-kernels-lock-digests/1",
     "locks": {"acme/softmax": {"commit": "<40 hex>", "tag": "v1.0.0", "manifest-sha256": "<64 hex>"}}}

Reading accepts a lock HF wrote (no sidecar: the release is pinned by commit, and every file is still checked against
the manifest at that commit), and the older single-file form this project wrote (``tag`` and ``digest`` inside
``lock``). A sidecar that pins another commit than the lock is refused: one of the two files is stale.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from hub_client.atomic import write_text
from hub_client.errors import LockError
from hub_client.package import shown
from hub_client.resolve import COMMIT

LOCK_NAME = "kernels.lock"
DIGESTS_SUFFIX = ".digests"  # kernels.lock.digests: the sidecar
DIGESTS_FORMAT = "nki-kernels-lock-digests/1"
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
# Hugging Face's repo id rule: org/name of letters, digits, '.', '_' and '-', each at most 96, starting and ending
# with a letter or digit, no '--' or '..'. A lock from elsewhere names repos; they become cache folders and labels.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_ID = re.compile(rf"^{_NAME}/{_NAME}\Z")
_TAG = re.compile(r"^v(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\Z")  # a release tag, v1.0.0
MAX_MAJOR = (1 << 31) - 1


def _is_repo_id(value: object) -> bool:
    return isinstance(value, str) and _REPO_ID.match(value) is not None and "--" not in value and ".." not in value


def _is_major(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_MAJOR


@dataclass(frozen=True)
class Locked:
    repo_id: str
    version: int | None  # the major the project asked for (None: HF's revision-pinned form)
    commit: str
    tag: str | None
    digest: str | None  # hex sha256 of the bundle manifest; None when only the commit is pinned (an HF lock)


def digests_path(lock_path: str | Path) -> Path:
    lock_path = Path(lock_path)
    return lock_path.with_name(lock_path.name + DIGESTS_SUFFIX)


def dependencies(project_dir: str | Path) -> dict[str, int]:
    path = Path(project_dir) / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise LockError(f"{path}: not found (kernels lock reads [tool.kernels.dependencies] from it)") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise LockError(f"{path}: not valid TOML ({str(e)[:200]})") from None
    deps = data
    for key in ("tool", "kernels", "dependencies"):
        deps = deps.get(key) if isinstance(deps, dict) else None
    if not isinstance(deps, dict) or not deps:
        raise LockError(f'{path}: no [tool.kernels.dependencies] (e.g. "acme/softmax" = 1)')
    for repo_id, major in deps.items():
        if not _is_major(major) or not _is_repo_id(repo_id):
            raise LockError(f'{path}: dependency {shown(repo_id)} = {shown(major)}: expected "org/name" = <major '
                            f'version>')  # fmt: skip
    return dict(sorted(deps.items()))


def write_lock(path: str | Path, entries: list[Locked]) -> None:
    """``kernels.lock`` in HF's format and its digest sidecar (each written atomically)."""
    entries = sorted(entries, key=lambda e: e.repo_id)
    data = [{"dependency": {"repo-id": e.repo_id, "version": e.version}, "lock": {"commit": e.commit}}
            for e in entries]  # fmt: skip
    sidecar = {"format": DIGESTS_FORMAT,
               "locks": {e.repo_id: {"commit": e.commit, "tag": e.tag, "manifest-sha256": e.digest}
                         for e in entries if e.digest is not None}}  # fmt: skip
    write_text(digests_path(path), json.dumps(sidecar, indent=2, sort_keys=True) + "\n")
    write_text(path, json.dumps(data, indent=2))  # byte for byte what HF's `kernels lock` writes (no final newline)


def _load_json(path: Path, missing: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        if missing == "none":
            return None
        raise LockError(f"{path}: no lock file (run `nki-kernels lock {path.parent}`)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, and an integer past 4,300 digits (plain ValueError)
        raise LockError(f"{path}: not valid JSON ({str(e)[:200]})") from None
    except RecursionError:  # json's decoder recurses per nesting level: [[[[...]]]] a few thousand deep
        raise LockError(f"{path}: not valid JSON (nested deeper than the JSON reader goes)") from None


def _entry(path: Path, item) -> Locked:
    try:
        dep, lock = item["dependency"], item["lock"]
        repo_id, commit = dep["repo-id"], lock["commit"]
        version = dep.get("version")
        tag, digest = lock.get("tag"), lock.get("digest")  # this project's older single-file form
    except (TypeError, KeyError, AttributeError):
        raise LockError(f"{path}: each entry needs dependency.repo-id and lock.commit") from None
    if not _is_repo_id(repo_id):
        raise LockError(f"{path}: repo-id {shown(repo_id)} is not 'org/name'")
    if version is not None and not _is_major(version):
        raise LockError(f"{path}: {repo_id}: version must be a major version number, got {shown(version)}")
    if not isinstance(commit, str) or not COMMIT.match(commit):
        raise LockError(f"{path}: {repo_id}: commit must be 40 hex digits, lowercase, got {shown(commit)}")
    if digest is not None:
        if not isinstance(digest, str) or not digest.startswith("sha256:") or not _HEX64.match(digest[7:]):
            raise LockError(f"{path}: {repo_id}: digest must be sha256:<64 hex>")
        digest = digest[7:]
    return Locked(repo_id, version, commit, _tag(tag), digest)


def _cut(value: object) -> str:
    """A value for a message as ``str`` gives it, at most 64 characters (a hostile sidecar's are not echoed whole)."""
    text = str(value)
    return text if len(text) <= 64 else text[:64] + "..."


def _tag(tag: object) -> str | None:
    """A release tag (``v1.0.0``) names the release in messages only: anything else is read as no tag."""
    return tag if isinstance(tag, str) and _TAG.match(tag) else None


def _pin(sidecar_path: Path, sidecar: dict, entry: Locked) -> Locked:
    record = sidecar.get(entry.repo_id)
    if record is None:
        return entry
    if not isinstance(record, dict) or not isinstance(record.get("manifest-sha256"), str) or not _HEX64.match(
            record["manifest-sha256"]):  # fmt: skip
        raise LockError(f"{sidecar_path}: {entry.repo_id}: manifest-sha256 must be 64 hex digits")
    if record.get("commit") != entry.commit:
        raise LockError(
            f"{sidecar_path} pins {entry.repo_id} at commit {_cut(record.get('commit'))}, but {LOCK_NAME} at "
            f"{entry.commit}: one of them is stale (the lock was rewritten without its digests); run `nki-kernels lock`"
        )
    tag = _tag(record.get("tag"))
    return Locked(entry.repo_id, entry.version, entry.commit, tag or entry.tag,
                  record["manifest-sha256"])  # fmt: skip


def read_lock(path: str | Path) -> dict[str, Locked]:
    path = Path(path)
    data = _load_json(path, "error")
    if not isinstance(data, list):
        raise LockError(f"{path}: expected a JSON list of locked kernels (HF kernels' format)")
    sidecar_path = digests_path(path)
    raw = _load_json(sidecar_path, "none")
    if raw is not None and (not isinstance(raw, dict) or raw.get("format") != DIGESTS_FORMAT
                            or not isinstance(raw.get("locks"), dict)):  # fmt: skip
        raise LockError(f"{sidecar_path}: not a {DIGESTS_FORMAT} file")
    sidecar = raw["locks"] if raw is not None else {}
    out = {}
    for item in data:
        entry = _entry(path, item)
        if entry.repo_id in out:  # which of the two would be used is nobody's choice
            raise LockError(f"{path}: {entry.repo_id} is locked twice")
        out[entry.repo_id] = _pin(sidecar_path, sidecar, entry) if entry.digest is None else entry
    return out
