"""The Hub commit payload (NDJSON: a header line, then one line per file operation) and the tree it produces.

Parsing validates the whole payload before anything is written: a bad path, bad base64 or an unsupported
operation on line 40 refuses the commit with nothing stored. Applying the operations reads the parent's file
list and edits it in memory (blob ids computed as git does); only then are blobs stored and one git tree per
directory written, bottom-up, with `git mktree`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field

from . import names
from .errors import HubError, bad_request
from .gitstore import FILE_MODE, TREE_MODE, GitRepo


@dataclass(frozen=True)
class AddFile:
    path: str
    content: bytes


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class DeleteFolder:
    path: str


@dataclass
class CommitRequest:
    summary: str
    description: str = ""
    parent_commit: str | None = None
    operations: list[AddFile | DeleteFile | DeleteFolder] = field(default_factory=list)

    @property
    def message(self) -> str:
        body = self.description.strip()
        return f"{self.summary}\n\n{body}\n" if body else f"{self.summary}\n"


def parse_commit_payload(body: bytes) -> CommitRequest:
    lines = [line for line in body.split(b"\n") if line.strip()]
    if not lines:
        raise bad_request("Empty commit payload")
    items = []
    for number, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise bad_request(f"Commit payload line {number} is not JSON: {exc}") from None
        if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
            raise bad_request(f"Commit payload line {number}: expected {{'key': ..., 'value': {{...}}}}")
        items.append(item)
    header, *ops = items
    if header.get("key") != "header":
        raise bad_request("Commit payload must start with a 'header' line")
    value = header["value"]
    summary = value.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise bad_request("Commit summary is required")
    parent = value.get("parentCommit")
    if parent is not None and (not isinstance(parent, str) or not names.FULL_SHA.fullmatch(parent)):
        raise bad_request(f"parentCommit must be a full 40-hex commit id, got {parent!r}")
    request = CommitRequest(summary.strip(), str(value.get("description") or ""), parent)
    seen: set[str] = set()
    for item in ops:
        operation = _parse_operation(item["key"], item["value"])
        if operation.path in seen:
            raise bad_request(f"Path {operation.path!r} appears twice in one commit")
        seen.add(operation.path)
        request.operations.append(operation)
    return request


def _parse_operation(key: str, value: dict) -> AddFile | DeleteFile | DeleteFolder:
    if key == "file":
        path = names.path_in_repo(value.get("path"))
        if value.get("encoding") != "base64" or not isinstance(value.get("content"), str):
            raise bad_request(f"File {path!r}: content must be a base64 string with encoding 'base64'")
        try:
            content = base64.b64decode(value["content"], validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(f"File {path!r}: content is not valid base64") from None
        return AddFile(path, content)
    if key == "deletedFile":
        return DeleteFile(names.path_in_repo(value.get("path")))
    if key == "deletedFolder":
        return DeleteFolder(names.path_in_repo(str(value.get("path", "")).rstrip("/")))
    if key == "lfsFile":
        # preupload answers "regular" for every file, so a conforming client never sends LFS pointers; an LFS
        # pointer here would name bytes this server was never given.
        raise bad_request("LFS files are not supported by this registry (preupload always answers 'regular')")
    raise bad_request(f"Unknown commit operation {key!r}")


def git_blob_id(content: bytes) -> str:
    """The id git gives a blob: sha1 over a `blob <size>\\0` header and the bytes."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest()


@dataclass
class TreePlan:
    """A commit's file list, plus what lets unchanged directories keep their existing tree objects."""

    files: dict[str, str]  # path -> blob id
    base_trees: dict[str, str]  # directory -> tree id in the parent commit
    touched: set[str]  # directories whose content the operations change ("" is the root)


def apply_operations(repo: GitRepo, base_commit: str, operations: list) -> TreePlan:
    """The file list of `base_commit` with `operations` applied, computed without writing anything.

    Every refusal a commit can meet (a file where a directory is, deleting a missing file) happens here, before
    any object is stored. Blob ids are computed as git computes them.
    """
    files, base_trees = {}, {"": ""}
    for entry in repo.ls_tree(base_commit, recursive=True):
        if entry.type == "blob":
            files[entry.path] = entry.oid
        elif entry.type == "tree":
            base_trees[entry.path] = entry.oid
    touched = {""}
    for operation in operations:
        touched.update(_ancestors(operation.path))
        if isinstance(operation, AddFile):
            _check_no_file_dir_clash(files, operation.path)
            files[operation.path] = git_blob_id(operation.content)
        elif isinstance(operation, DeleteFile):
            if files.pop(operation.path, None) is None:
                raise HubError(404, f"Cannot delete {operation.path!r}: no such file", "EntryNotFound")
        else:
            prefix = operation.path + "/"
            for path in [path for path in files if path.startswith(prefix)]:
                del files[path]
    return TreePlan(files, base_trees, touched)


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(len(parts))]


def _check_no_file_dir_clash(files: dict[str, str], path: str) -> None:
    segments = path.split("/")
    for depth in range(1, len(segments)):
        if "/".join(segments[:depth]) in files:
            raise bad_request(f"Cannot add {path!r}: {'/'.join(segments[:depth])!r} is a file")
    prefix = path + "/"
    if any(existing.startswith(prefix) for existing in files):
        raise bad_request(f"Cannot add {path!r}: it is a directory")


def write_trees(repo: GitRepo, plan: TreePlan) -> str:
    """Write the trees for a plan whose blobs are already stored; returns the root tree id.

    Only directories on the path of a changed file are written: an untouched directory keeps its tree id from
    the parent commit, so a commit costs git processes in proportion to what it changes, not to the repo size.
    """
    # directory -> {name: (mode, type, oid)}; written deepest-first so each subtree exists before its parent.
    directories: dict[str, dict[str, tuple[str, str, str]]] = {"": {}}
    for path, oid in plan.files.items():
        parent, _, name = path.rpartition("/")
        directories.setdefault(parent, {})[name] = (FILE_MODE, "blob", oid)
        while parent:  # make sure every ancestor directory is listed
            directories.setdefault(parent.rpartition("/")[0], {})
            parent = parent.rpartition("/")[0]
    for directory in sorted(directories, key=lambda d: d.count("/") + (d != ""), reverse=True):
        if directory in plan.touched or directory not in plan.base_trees:
            entries = directories[directory]
            oid = repo.mktree([(mode, kind, oid, name) for name, (mode, kind, oid) in entries.items()])
        else:
            oid = plan.base_trees[directory]
        if not directory:
            return oid
        parent, _, name = directory.rpartition("/")
        directories[parent][name] = (TREE_MODE, "tree", oid)
    raise AssertionError("unreachable: the root directory is always written last")
