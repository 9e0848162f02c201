"""One bare git repository on disk, read and written only through the `git` executable.

Every write goes through git's own plumbing (`hash-object -w`, `mktree`, `commit-tree`, `mktag`) and every
ref change through `git update-ref <ref> <new> <old>`, which takes git's ref lock and compares the old value
before writing: the compare-and-swap that makes two racing commits or tags end with exactly one winner, across
threads and across server processes. Because the store is plain git, a repo survives restarts, `git clone`
works on it, and `git fsck` can audit it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ZERO_OID = "0" * 40
FILE_MODE = "100644"
TREE_MODE = "040000"

# Git must not pick up the machine's or the user's configuration (hooks, templates, signing, an `init`
# default branch of another name): the registry's behaviour is fixed by this module alone.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


class GitError(RuntimeError):
    pass


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    type: str  # "blob" or "tree"
    oid: str
    size: int | None  # bytes for blobs, None for trees
    path: str


@dataclass(frozen=True)
class Author:
    name: str
    email: str


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(_GIT_ENV)
    if extra:
        env.update(extra)
    return env


class GitRepo:
    def __init__(self, path: Path):
        self.path = Path(path)

    # -- running git ------------------------------------------------------------------------------------

    def _run(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None):
        return subprocess.run(["git", f"--git-dir={self.path}", *args], input=input, capture_output=True, env=_env(env))

    def git(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None, check=True) -> bytes:
        proc = self._run(*args, input=input, env=env)
        if check and proc.returncode != 0:
            raise GitError(f"git {args[0]} failed in {self.path}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    @classmethod
    def init_bare(cls, path: Path) -> GitRepo:
        proc = subprocess.run(
            ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)], capture_output=True, env=_env()
        )
        if proc.returncode != 0:
            raise GitError(f"git init failed for {path}: {proc.stderr.decode(errors='replace').strip()}")
        return cls(path)

    # -- config (repo settings such as visibility live in the repo's own git config) --------------------------

    def config_get(self, key: str) -> str | None:
        out = self.git("config", "--get", key, check=False)
        return out.decode().strip() or None

    def config_set(self, key: str, value: str) -> None:
        self.git("config", key, value)

    # -- refs -------------------------------------------------------------------------------------------------

    def refs(self) -> dict[str, str]:
        """Every branch and tag, as full ref name -> commit oid (annotated tags peeled to their commit)."""
        fields = "--format=%(refname)%00%(objectname)%00%(*objectname)"
        out = self.git("for-each-ref", fields, "refs/heads", "refs/tags")
        refs = {}
        for line in out.decode().splitlines():
            name, oid, peeled = line.split("\x00")
            refs[name] = peeled or oid
        return refs

    def ref_oid(self, ref: str) -> str | None:
        """The raw value of one ref (for a tag: the tag object, not the commit), or None if absent."""
        out = self.git("rev-parse", "--verify", "--quiet", ref, check=False)
        return out.decode().strip() or None

    def has_commit(self, oid: str) -> bool:
        out = self.git("cat-file", "-t", oid, check=False)
        return out.decode().strip() == "commit"

    def update_ref(self, ref: str, new: str, old: str) -> bool:
        """Atomically move `ref` from `old` to `new` (old=ZERO_OID: the ref must not exist yet).

        Returns False when the ref was not at `old` (another writer won the race); nothing is changed then.
        """
        proc = self._run("update-ref", "-m", "registry", ref, new, old)
        if proc.returncode == 0:
            return True
        current = self.ref_oid(ref)
        if current != (None if old == ZERO_OID else old):
            return False  # lost the compare-and-swap
        raise GitError(f"git update-ref {ref} failed: {proc.stderr.decode(errors='replace').strip()}")

    def delete_ref(self, ref: str, old: str) -> bool:
        return self._run("update-ref", "-d", ref, old).returncode == 0

    # -- reading objects --------------------------------------------------------------------------------------

    def ls_tree(self, commit: str, path: str | None = None, recursive: bool = False) -> list[TreeEntry]:
        """Entries of the tree at `path` (the root if None); recursive lists subtrees and their contents too."""
        treeish = f"{commit}:{path}" if path else f"{commit}^{{tree}}"
        args = ["ls-tree", "-z", "-l"] + (["-r", "-t"] if recursive else []) + [treeish]
        entries = []
        for record in self.git(*args).split(b"\x00"):
            if not record:
                continue
            meta, name = record.split(b"\t", 1)
            mode, kind, oid, size = meta.decode().split()
            full = f"{path}/{name.decode()}" if path else name.decode()
            entries.append(TreeEntry(mode, kind, oid, None if size == "-" else int(size), full))
        return entries

    def object_at(self, commit: str, path: str) -> TreeEntry | None:
        """The blob or tree at `path` in `commit`, or None if the path does not exist there."""
        return self.objects_at(commit, [path])[0]

    def objects_at(self, commit: str, paths: list[str]) -> list[TreeEntry | None]:
        """`object_at` for many paths with one git process (paths are validated: no newline can split a query)."""
        if not paths:
            return []
        query = "".join(f"{commit}:{path}\n" for path in paths).encode()
        lines = self.git("cat-file", "--batch-check", input=query).decode().splitlines()
        found = []
        for path, line in zip(paths, lines, strict=True):
            parts = line.split()
            if len(parts) != 3 or parts[1] not in ("blob", "tree"):
                found.append(None)  # "<commit>:<path> missing"
                continue
            oid, kind, size = parts
            mode, size_or_none = (FILE_MODE, int(size)) if kind == "blob" else (TREE_MODE, None)
            found.append(TreeEntry(mode, kind, oid, size_or_none, path))
        return found

    def stream_blob(self, oid: str, start: int = 0, stop: int | None = None, piece: int = 64 * 1024):
        """Bytes [start, stop) of a blob, in pieces read from `git cat-file`, so memory does not grow with it."""
        proc = subprocess.Popen(["git", f"--git-dir={self.path}", "cat-file", "blob", oid], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=_env())
        try:
            position = 0
            while stop is None or position < stop:
                data = proc.stdout.read(piece)
                if not data:
                    break
                begin, end = max(start - position, 0), len(data) if stop is None else min(stop - position, len(data))
                position += len(data)
                if begin < end:
                    yield data[begin:end]
        finally:
            proc.stdout.close()
            proc.kill()
            proc.wait()

    def commit_date(self, commit: str) -> str:
        """Committer date as the Hub writes `lastModified` (UTC, milliseconds, 'Z'), which the client parses."""
        seconds = int(self.git("show", "-s", "--format=%ct", commit).decode().strip())
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def log(self, commit: str, skip: int, count: int) -> list[dict]:
        """``count`` commits reachable from ``commit``, newest first, after skipping ``skip``: (id, author, UTC
        date, title, message) as the Hub's commit listing reports them."""
        fields = "--format=%H%x00%an%x00%ct%x00%s%x00%B%x1e"
        out = self.git("log", fields, f"--skip={int(skip)}", f"--max-count={int(count)}", commit, "--")
        commits = []
        for record in out.decode(errors="replace").split("\x1e"):
            record = record.strip("\n")
            if not record:
                continue
            oid, author, seconds, title, message = record.split("\x00", 4)
            date = datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            commits.append({"id": oid, "author": author, "date": date, "title": title, "message": message.strip()})
        return commits

    # -- writing objects --------------------------------------------------------------------------------------

    def write_blobs(self, contents: list[bytes], scratch: Path) -> list[str]:
        """Store small in-memory blobs (the registry's own files); see `write_blob_files`."""
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            paths = []
            for index, data in enumerate(contents):
                path = Path(tmp, str(index))
                path.write_bytes(data)
                paths.append(path)
            return self.write_blob_files(paths)

    def write_blob_files(self, files: list[Path]) -> list[str]:
        """Store files as blobs with `git hash-object -w`; one git process for the batch via --stdin-paths.

        git reads the files itself, so a large blob never passes through this process's memory.
        """
        if not files:
            return []
        listing = "\n".join(str(path) for path in files).encode()
        out = self.git("hash-object", "-w", "--no-filters", "--stdin-paths", input=listing)
        oids = out.decode().split()
        if len(oids) != len(files):
            raise GitError("git hash-object returned the wrong number of object ids")
        return oids

    def mktree(self, entries: list[tuple[str, str, str, str]]) -> str:
        """Write one tree from (mode, type, oid, name) entries; git sorts and validates them."""
        data = b"".join(f"{mode} {kind} {oid}\t{name}".encode() + b"\x00" for mode, kind, oid, name in entries)
        return self.git("mktree", "-z", input=data).decode().strip()

    def commit_tree(self, tree: str, parents: list[str], message: str, author: Author) -> str:
        identity = {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_COMMITTER_NAME": author.name,
            "GIT_COMMITTER_EMAIL": author.email,
        }
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.git(*args, input=message.encode(), env=identity).decode().strip()

    def mktag(self, target: str, name: str, message: str, author: Author, timestamp: int) -> str:
        """An annotated tag object (only written when the client sends a tag message, as the Hub does)."""
        body = (
            f"object {target}\ntype commit\ntag {name}\n"
            f"tagger {author.name} <{author.email}> {timestamp} +0000\n\n{message.rstrip()}\n"
        )
        return self.git("mktag", input=body.encode()).decode().strip()
