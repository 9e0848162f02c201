"""Validation of every name a request carries: repo types, repo ids, ref names and paths inside a repo.

These checks are the registry's security boundary. A repo id becomes a directory under the server root, a ref
name becomes a git ref, a path becomes a tree entry: anything that could escape the root, smuggle git revision
syntax (`HEAD~1`, `main@{1}`, `a..b`) into `git rev-parse`, or write a tree git itself would reject
(`..`, empty segments, NUL) is refused here with a 400, before any git command runs.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import bad_request

# Repo type (singular, as huggingface_hub sends it in bodies) -> URL word (plural, as in /api/<word>/...).
# huggingface_hub 2.4.0 knows the `kernel` type (constants.REPO_TYPES_WITH_KERNEL), so kernels are served
# natively; the other three types exist so a plain `HfApi` call with the default type also works.
REPO_TYPES = {"model": "models", "dataset": "datasets", "space": "spaces", "kernel": "kernels"}
PLURAL_TO_TYPE = {plural: singular for singular, plural in REPO_TYPES.items()}
# The prefix a repo type carries in resolve URLs and repo URLs (models have none).
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}

# Hub rules for a namespace or repo name: starts alphanumeric, then letters, digits, '-', '_', '.'; no '--' or
# '..' (the Hub reserves '--' for cache folder names); at most 96 characters.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")

# Characters git forbids in ref names (git-check-ref-format), plus '%' and whitespace which no Hub ref uses.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\%]")
FULL_SHA = re.compile(r"[0-9a-f]{40}")


def repo_type(value: str | None) -> str:
    """Normalise a singular repo type from a request body; None means model, as on the Hub."""
    value = value or "model"
    if value not in REPO_TYPES:
        raise bad_request(f"Unknown repo type {value!r}; expected one of {sorted(REPO_TYPES)}")
    return value


def repo_name(value: str, what: str = "repo name") -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or "--" in value or ".." in value:
        raise bad_request(f"Invalid {what} {value!r}: use letters, digits, '-', '_', '.' (no '--' or '..')")
    if value.lower().endswith((".git", ".lock")):  # any case: the directory is the same on macOS and Windows
        raise bad_request(f"Invalid {what} {value!r}: may not end with .git or .lock")
    return value


def ref_name(value: str, what: str = "revision") -> str:
    """A branch or tag name that git accepts as-is and that `git rev-parse` cannot read as an expression."""
    bad = (
        not isinstance(value, str)
        or not value
        or len(value) > 255
        or _REF_FORBIDDEN.search(value)
        or value.startswith(("-", "/", "."))
        or value.endswith(("/", ".", ".lock"))
        or ".." in value
        or "//" in value
        or "@{" in value
        or "/." in value
        or value == "@"
        or value == "HEAD"
    )
    if bad:
        raise bad_request(f"Invalid {what} {value!r}")
    return value


# Limits on a path inside a repo, so that every file the registry stores can be checked out by git and written by
# a client on Linux (ext4/xfs: 255-byte names), macOS (APFS/HFS+: 255 UTF-16 units, PATH_MAX 1024) and Windows
# (NTFS: 255 UTF-16 units, reserved device names and characters). The total is well below macOS's PATH_MAX so the
# client's cache prefix (`.../hub/kernels--org--name/snapshots/<40 hex>/`) still fits in front of it.
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 768
MAX_PATH_DEPTH = 32
# Windows refuses these in any file name (and ':' also names NTFS alternate data streams: `.git::$INDEX_ALLOCATION`).
_WINDOWS_FORBIDDEN = set('<>:"|?*')
# Windows device names, reserved with any extension ("nul.txt" too) and any case.
_WINDOWS_DEVICES = re.compile(r"(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?", re.IGNORECASE)
# git's own names: `.git` would be a repository inside the checkout, `.gitmodules` a submodule configuration that
# `git fsck` audits (and this registry never has submodules); `git~1` / `gitmod~1` are their NTFS 8.3 short names.
_GIT_RESERVED = re.compile(r"\.git|git~[0-9]+|\.gitmodules|gitmod~[0-9]+", re.IGNORECASE)
# Unicode categories that must not appear in a name: controls (Cc), format characters (Cf: bidi overrides such as
# U+202E, zero-width joiners that HFS+ ignores, so `.g\u200cit` is `.git` on a Mac), surrogates (Cs), private-use
# (Co), unassigned (Cn), and line/paragraph separators (Zl, Zp).
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def path_in_repo(value: str) -> str:
    """A relative file path inside a repo that git, fsck --strict and every major filesystem accept.

    '/'-separated; no empty, '.' or '..' segment; no `.git` / `.gitmodules` segment in any letter case; no
    control, format (bidi), separator or unassigned characters; no Windows-forbidden characters or device names;
    no segment that is blank or ends in a dot or space (Windows drops those, so `.git.` is `.git` there);
    NFC-normalised (macOS stores NFD, so two spellings of one name would collide); bounded segment and total length.
    """
    if not isinstance(value, str) or not value:
        raise bad_request("Empty path in repo")
    if "\x00" in value or "\\" in value:
        raise bad_request(f"Invalid path {value!r}: NUL and backslash are not allowed")
    if value.startswith("/"):
        raise bad_request(f"Invalid path {value!r}: absolute paths are not allowed")
    for ch in value:
        if unicodedata.category(ch) in _FORBIDDEN_CATEGORIES:
            raise bad_request(f"Invalid path {value!r}: character U+{ord(ch):04X} "
                              f"({unicodedata.category(ch)}) is not allowed in a file name")
        if ch in _WINDOWS_FORBIDDEN:
            raise bad_request(f"Invalid path {value!r}: {ch!r} is not allowed in a file name (Windows refuses it)")
    if unicodedata.normalize("NFC", value) != value:
        raise bad_request(f"Invalid path {value!r}: must be in Unicode normal form NFC")
    encoded = len(value.encode("utf-8"))
    if encoded > MAX_PATH_BYTES:
        raise bad_request(f"Invalid path {value[:64]!r}...: {encoded} bytes, at most {MAX_PATH_BYTES} allowed")
    segments = value.split("/")
    if len(segments) > MAX_PATH_DEPTH:
        raise bad_request(f"Invalid path {value!r}: {len(segments)} levels deep, at most {MAX_PATH_DEPTH} allowed")
    for segment in segments:
        _check_segment(value, segment)
    return value


def _check_segment(path: str, segment: str) -> None:
    if segment in ("", ".", ".."):
        raise bad_request(f"Invalid path {path!r}: empty, '.' and '..' segments are not allowed")
    if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
        raise bad_request(f"Invalid path {path[:64]!r}...: a name is longer than {MAX_SEGMENT_BYTES} bytes")
    if not segment.strip() or segment[-1] in ". " or segment != segment.rstrip():
        raise bad_request(f"Invalid path {path!r}: a name may not be blank or end in a dot or space ({segment!r})")
    if _GIT_RESERVED.fullmatch(segment):
        raise bad_request(f"Invalid path {path!r}: {segment!r} is reserved by git")
    if _WINDOWS_DEVICES.fullmatch(segment):
        raise bad_request(f"Invalid path {path!r}: {segment!r} is a reserved device name on Windows")
