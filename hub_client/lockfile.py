"""``kernels.lock``: the kernels a project depends on, pinned to commits and bundle digests.

A project declares its kernels in ``pyproject.toml`` as HF kernels does (integers are major versions)::

    [tool.kernels.dependencies]
    "acme/softmax" = 1

``kernels lock DIR`` resolves each to the newest release of that major and writes (atomically) a JSON list in the
HF kernels 0.17 shape, plus the release tag and the sha256 of the bundle manifest, which pins every file::

    [{"dependency": {"repo-id": "acme/softmax", "version": 1},
      "lock": {"commit": "<40 hex>", "tag": "v1.0.0", "digest": "sha256:<64 hex>"}}]
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from hub_client.atomic import write_text
from hub_client.errors import LockError
from hub_client.resolve import COMMIT

LOCK_NAME = "kernels.lock"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class Locked:
    repo_id: str
    version: int
    commit: str
    tag: str | None
    digest: str  # hex sha256 of the bundle manifest


def dependencies(project_dir: str | Path) -> dict[str, int]:
    path = Path(project_dir) / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise LockError(f"{path}: not found (kernels lock reads [tool.kernels.dependencies] from it)") from None
    deps = data.get("tool", {}).get("kernels", {}).get("dependencies")
    if not isinstance(deps, dict) or not deps:
        raise LockError(f'{path}: no [tool.kernels.dependencies] (e.g. "acme/softmax" = 1)')
    for repo_id, major in deps.items():
        if isinstance(major, bool) or not isinstance(major, int) or major < 0 or repo_id.count("/") != 1:
            raise LockError(f'{path}: dependency {repo_id!r} = {major!r}: expected "org/name" = <major version>')
    return dict(sorted(deps.items()))


def write_lock(path: str | Path, entries: list[Locked]) -> None:
    data = [
        {"dependency": {"repo-id": e.repo_id, "version": e.version},
         "lock": {"commit": e.commit, "tag": e.tag, "digest": f"sha256:{e.digest}"}}
        for e in sorted(entries, key=lambda e: e.repo_id)
    ]  # fmt: skip
    write_text(path, json.dumps(data, indent=2) + "\n")


def read_lock(path: str | Path) -> dict[str, Locked]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise LockError(f"{path}: no lock file (run `kernels lock {path.parent}`)") from None
    except json.JSONDecodeError as e:
        raise LockError(f"{path}: not valid JSON ({e})") from None
    out = {}
    for item in data if isinstance(data, list) else [None]:
        try:
            dep, lock = item["dependency"], item["lock"]
            entry = Locked(dep["repo-id"], int(dep["version"]), lock["commit"], lock.get("tag"), lock["digest"])
        except (TypeError, KeyError, ValueError):
            raise LockError(f"{path}: each entry needs dependency.repo-id/version and lock.commit/digest") from None
        if not COMMIT.match(entry.commit) or not _DIGEST.match(entry.digest):
            raise LockError(f"{path}: {entry.repo_id}: commit must be 40 hex, digest sha256:<64 hex>")
        out[entry.repo_id] = Locked(entry.repo_id, entry.version, entry.commit, entry.tag, entry.digest[7:])
    return out
