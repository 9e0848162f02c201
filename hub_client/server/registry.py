"""The registry root on disk: where each repo lives, creating repos atomically, and per-repo write locks.

Layout: `<root>/<type plural>/<org>/<name>` is one bare git repository, e.g. `<root>/kernels/acme/softmax`.
Visibility is stored in that repo's git config (`hub.private`), so the repo directory alone is the whole state.
Scratch files (blob staging, half-built repos) live in `<root>/.tmp` and never inside a repo.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import names, refcache
from .errors import conflict, repo_not_found
from .gitstore import ZERO_OID, Author, GitRepo
from .limits import Limits

# A new repo gets one commit on `main`, as on the Hub, so `main` resolves and branches can start from it.
INITIAL_ATTRIBUTES = b"# Created by the nki-dsl kernel registry. Every file is stored as a regular git blob.\n"


@dataclass(frozen=True)
class RepoHandle:
    type: str  # singular repo type
    org: str
    name: str
    git: GitRepo
    private: bool

    @property
    def repo_id(self) -> str:
        return f"{self.org}/{self.name}"


class _VisibilityCache:
    """`hub.private` per repo, re-read with git only when the repo's config file changes (every read checks it)."""

    def __init__(self):
        self._seen: dict[Path, tuple[int, int, bool]] = {}
        self._guard = threading.Lock()

    def private(self, git: GitRepo) -> bool:
        stat = (git.path / "config").stat()
        key = (stat.st_ino, stat.st_mtime_ns)
        with self._guard:
            cached = self._seen.get(git.path)
        if cached is not None and cached[:2] == key:
            return cached[2]
        private = git.config_get("hub.private") == "true"
        with self._guard:
            self._seen[git.path] = (*key, private)
        return private


class Registry:
    def __init__(self, root: Path, trusted_publishers: frozenset[str] = frozenset(), limits: Limits | None = None):
        self.root = Path(root).resolve()
        self.limits = limits or Limits()
        self.scratch = self.root / ".tmp"
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.trusted_publishers = frozenset(trusted_publishers)
        self._locks: dict[Path, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._visibility = _VisibilityCache()

    def repo_dir(self, repo_type: str, org: str, name: str) -> Path:
        # names.repo_name has already refused anything but [A-Za-z0-9._-] without '..', so this stays under root.
        return self.root / names.REPO_TYPES[repo_type] / org / name

    def open(self, repo_type: str, org: str, name: str) -> RepoHandle:
        org, name = names.repo_name(org, "namespace"), names.repo_name(name)
        path = self.repo_dir(repo_type, org, name)
        if not (path / "HEAD").is_file():
            raise repo_not_found(f"{org}/{name}")
        git = GitRepo(path)
        return RepoHandle(repo_type, org, name, git, self._visibility.private(git))

    def create(self, repo_type: str, org: str, name: str, private: bool, author: Author) -> RepoHandle:
        """Build the repo in scratch, then rename it into place: the rename is the atomic "create if absent"."""
        org, name = names.repo_name(org, "namespace"), names.repo_name(name)
        final = self.repo_dir(repo_type, org, name)
        if final.exists():
            raise conflict(f"Repository {org}/{name} already exists")
        staging = Path(tempfile.mkdtemp(prefix="repo-", dir=self.scratch))
        try:
            git = GitRepo.init_bare(staging)
            git.config_set("hub.private", "true" if private else "false")
            (blob,) = git.write_blobs([INITIAL_ATTRIBUTES], self.scratch)
            tree = git.mktree([("100644", "blob", blob, ".gitattributes")])
            commit = git.commit_tree(tree, [], "initial commit\n", author)
            git.update_ref("refs/heads/main", commit, ZERO_OID)
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(staging, final)  # fails if another request created the repo in the meantime
            except OSError:
                raise conflict(f"Repository {org}/{name} already exists") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return RepoHandle(repo_type, org, name, GitRepo(final), private)

    def delete(self, repo: RepoHandle) -> None:
        # Move aside first so readers never see a half-deleted repo, then remove.
        grave = Path(tempfile.mkdtemp(prefix="deleted-", dir=self.scratch))
        os.rename(repo.git.path, grave / "repo")
        refcache.forget(repo.git.path)
        shutil.rmtree(grave, ignore_errors=True)

    def write_lock(self, repo: RepoHandle) -> threading.Lock:
        """Serialises writers to one repo inside this process, so they rarely lose a ref compare-and-swap.

        Correctness does not depend on it: `git update-ref` with an old value still decides every race,
        including races with another server process on the same root.
        """
        with self._locks_guard:
            return self._locks.setdefault(repo.git.path, threading.Lock())

    def organization(self, org: str, include_private: bool) -> dict | None:
        """Counts of repos per type under `org` that the caller may see, or None if it may see none of them.

        A caller who may not read private repos gets the counts and the 404 it would get if they did not exist.
        """
        org = names.repo_name(org, "organization")
        counts = {}
        for repo_type, plural in names.REPO_TYPES.items():
            directory = self.root / plural / org
            repos = directory.iterdir() if directory.is_dir() else ()
            counts[repo_type] = sum(
                1 for path in repos
                if (path / "HEAD").is_file() and (include_private or not self._visibility.private(GitRepo(path)))
            )
        if not any(counts.values()) and org not in self.trusted_publishers:
            return None
        return counts


def now_epoch() -> int:
    return int(time.time())
