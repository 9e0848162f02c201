"""The Hub commit payload (NDJSON: a header line, then one line per file operation) and the tree it produces.

Parsing validates the whole payload before anything is written: a bad path, bad base64 or an unsupported
operation on line 40 refuses the commit with nothing stored. It streams: each file's base64 content goes from the
request body through a decoder into a scratch file (its git blob id computed from that file), so a 100 MB commit
costs a few buffers of memory, not a few copies of 100 MB. Applying the operations reads the parent's file
list and edits it in memory (blob ids computed as git does); only then are blobs stored and one git tree per
directory written, bottom-up, with `git mktree`.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from . import jsonstream, names
from .errors import HubError, bad_request
from .gitstore import FILE_MODE, TREE_MODE, GitRepo

# What `git fsck` checks in a `.gitattributes` blob (git's attr.c: ATTR_MAX_LINE_LENGTH, ATTR_MAX_FILE_SIZE).
GITATTRIBUTES_MAX_LINE = 2048
GITATTRIBUTES_MAX_SIZE = 100 * 1024 * 1024
_BASE64_ALPHABET = re.compile(rb"[^A-Za-z0-9+/=]")
_HASH_PIECE = 1024 * 1024


@dataclass(frozen=True)
class StagedBlob:
    """A file's decoded bytes in a scratch file, with the id git will give them."""

    file: Path
    size: int
    oid: str


@dataclass(frozen=True)
class AddFile:
    path: str
    blob: StagedBlob


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


class _Base64ToFile:
    """Decodes a streamed base64 string into a scratch file, four characters at a time, checking as strictly as
    `base64.b64decode(validate=True)`: alphabet only, padding only at the very end."""

    def __init__(self, file: Path):
        self.file = file
        self._out = open(file, "wb")  # noqa: SIM115 - closed in close(), or by the staging directory's removal
        self._carry = b""
        self._padded = False
        self.size = 0

    def write(self, piece: bytes) -> None:
        if _BASE64_ALPHABET.search(piece):
            raise bad_request("File content is not valid base64 (a character outside the base64 alphabet)")
        data = self._carry + piece
        whole = len(data) - len(data) % 4
        self._carry = data[whole:]
        if whole:
            self._decode(data[:whole])

    def _decode(self, quads: bytes) -> None:
        if self._padded:
            raise bad_request("File content is not valid base64 (data after the '=' padding)")
        try:
            decoded = binascii.a2b_base64(quads, strict_mode=True)
        except binascii.Error:
            raise bad_request("File content is not valid base64") from None
        self._padded = quads.endswith(b"=")
        self._out.write(decoded)
        self.size += len(decoded)

    def discard(self) -> None:
        """Close the scratch file if a malformed payload stopped the parse midway (no-op once closed)."""
        self._out.close()

    def close(self) -> StagedBlob:
        self._out.close()
        if self._carry:
            raise bad_request("File content is not valid base64 (its length is not a multiple of 4)")
        digest = hashlib.sha1(b"blob %d\x00" % self.size)
        with open(self.file, "rb") as staged:
            while piece := staged.read(_HASH_PIECE):
                digest.update(piece)
        return StagedBlob(self.file, self.size, digest.hexdigest())


def parse_commit_payload(body: IO[bytes], staging: Path, line_budget: int = 1024 * 1024) -> CommitRequest:
    """Read and check a whole NDJSON commit payload, staging every file's bytes under `staging`.

    Memory stays bounded whatever the payload's size: file contents stream from `body` through the base64
    decoder into scratch files, and everything else on a line is limited to `line_budget` bytes.
    """
    sinks: list[_Base64ToFile] = []

    def sink() -> _Base64ToFile:
        sinks.append(_Base64ToFile(staging / f"blob-{len(sinks)}"))
        return sinks[-1]

    try:
        return _parse_lines(body, line_budget, sink)
    finally:
        for opened in sinks:
            opened.discard()


def _parse_lines(body: IO[bytes], line_budget: int, sink) -> CommitRequest:
    lines = jsonstream.LineReader(body, "Commit payload", max_depth=8, line_budget=line_budget,
                                  stream_at=("value", "content"), sink_factory=sink)
    header = lines.read_line()
    if header is jsonstream.END_OF_STREAM:
        raise bad_request("Empty commit payload")
    if not _is_item(header) or header.get("key") != "header":
        raise bad_request("Commit payload must start with a 'header' line: {'key': 'header', 'value': {...}}")
    request = _parse_header(header["value"])
    seen: set[str] = set()
    while (item := lines.read_line()) is not jsonstream.END_OF_STREAM:
        if not _is_item(item):
            raise bad_request(f"Commit payload line {lines.line}: expected {{'key': ..., 'value': {{...}}}}")
        operation = _parse_operation(item["key"], item["value"])
        if operation.path in seen:
            raise bad_request(f"Path {operation.path!r} appears twice in one commit")
        seen.add(operation.path)
        request.operations.append(operation)
    return request


def _is_item(item) -> bool:
    return isinstance(item, dict) and isinstance(item.get("key"), str) and isinstance(item.get("value"), dict)


def _parse_header(value: dict) -> CommitRequest:
    summary = value.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise bad_request("Commit summary is required")
    description = value.get("description") or ""
    if not isinstance(description, str):
        raise bad_request("Commit description must be a string")
    for what, text in (("summary", summary), ("description", description)):
        if "\x00" in text:
            raise bad_request(f"Commit {what} contains a NUL character (git refuses it in a commit message)")
    parent = value.get("parentCommit")
    if parent is not None and (not isinstance(parent, str) or not names.FULL_SHA.fullmatch(parent)):
        raise bad_request(f"parentCommit must be a full 40-hex commit id, got {parent!r}")
    return CommitRequest(summary.strip(), description, parent)


def _parse_operation(key: str, value: dict) -> AddFile | DeleteFile | DeleteFolder:
    if key == "file":
        path = names.path_in_repo(value.get("path"))
        content = value.get("content")
        if value.get("encoding") != "base64" or not isinstance(content, StagedBlob):
            raise bad_request(f"File {path!r}: content must be a base64 string with encoding 'base64'")
        if path.rpartition("/")[2].casefold() == ".gitattributes":
            _check_gitattributes(path, content)
        return AddFile(path, content)
    if key == "deletedFile":
        return DeleteFile(names.path_in_repo(value.get("path")))
    if key == "deletedFolder":
        path = value.get("path")
        return DeleteFolder(names.path_in_repo(path.rstrip("/") if isinstance(path, str) else path))
    if key == "lfsFile":
        # preupload answers "regular" for every file, so a conforming client never sends LFS pointers; an LFS
        # pointer here would name bytes this server was never given.
        raise bad_request("LFS files are not supported by this registry (preupload always answers 'regular')")
    raise bad_request(f"Unknown commit operation {key[:64]!r}")


def _check_gitattributes(path: str, blob: StagedBlob) -> None:
    """Refuse what `git fsck` reports in a `.gitattributes` file, so the repo stays clean under `fsck --strict`."""
    if blob.size >= GITATTRIBUTES_MAX_SIZE:
        raise bad_request(f"{path!r} is {blob.size} bytes; git refuses .gitattributes files of 100 MiB or more")
    line, length = 1, 0  # read in pieces: one 99 MB line must not be held whole
    with open(blob.file, "rb") as staged:
        while piece := staged.read(_HASH_PIECE):
            *ended, rest = piece.split(b"\n")
            for part in ended:
                if length + len(part) >= GITATTRIBUTES_MAX_LINE:
                    break
                line, length = line + 1, 0
            else:
                length += len(rest)
                if length < GITATTRIBUTES_MAX_LINE:
                    continue
            raise bad_request(f"{path!r} line {line} is longer than git's {GITATTRIBUTES_MAX_LINE - 1}-byte "
                              "limit for .gitattributes lines")


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
            files[operation.path] = operation.blob.oid
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
