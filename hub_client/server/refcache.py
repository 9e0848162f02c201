"""Branch and tag listings served from memory while a repo's refs are unchanged on disk.

Every refs, tree, resolve and repo-info request turns a revision name into a commit, and listing refs with
`git for-each-ref` costs a process spawn (~1-2 ms) on each. Git keeps refs as files (`refs/heads/...`,
`refs/tags/...`, `packed-refs`) and changes one only by renaming a complete new file over it, so the names and
contents of those files are a signature that changes whenever any ref does, whoever wrote it: this server, another
server process on the same root, or git itself. Contents, not stat data: a loose ref is always 41 bytes and file
times tick in milliseconds, so two quick updates can leave identical (inode, mtime, size). A listing is reused only
while its signature still matches; reading a few small files is far cheaper than a spawn.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .gitstore import GitRepo

_cache: dict[Path, tuple[tuple, dict[str, str]]] = {}
_guard = threading.Lock()


def _signature(repo_dir: Path) -> tuple:
    entries = []
    stack = [repo_dir / "refs" / "heads", repo_dir / "refs" / "tags"]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif not entry.name.endswith(".lock"):
                        entries.append((entry.path, _read(entry.path)))
        except FileNotFoundError:
            continue
    entries.append(("packed-refs", _read(repo_dir / "packed-refs")))
    return tuple(sorted(entries))


def _read(path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:  # deleted between listing and reading: the signature still differs from before
        return None


def refs(git: GitRepo) -> dict[str, str]:
    """`git.refs()` (full ref name -> commit), from memory when no ref file changed since it was read."""
    before = _signature(git.path)
    with _guard:
        hit = _cache.get(git.path)
    if hit is not None and hit[0] == before:
        return dict(hit[1])
    listing = git.refs()
    # Keep it only if nothing moved while git was reading; otherwise the next request reads again.
    if _signature(git.path) == before:
        with _guard:
            _cache[git.path] = (before, listing)
    return dict(listing)


def forget(repo_dir: Path) -> None:
    """Drop a deleted repo's listing (a new repo at the same path has new ref files anyway)."""
    with _guard:
        _cache.pop(Path(repo_dir), None)
