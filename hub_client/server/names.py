"""Validation of every name a request carries: repo types, repo ids, ref names and paths inside a repo.

These checks are the registry's security boundary. A repo id becomes a directory under the server root, a ref
name becomes a git ref, a path becomes a tree entry: anything that could escape the root, smuggle git revision
syntax (`HEAD~1`, `main@{1}`, `a..b`) into `git rev-parse`, or write a tree git itself would reject
(`..`, empty segments, NUL) is refused here with a 400, before any git command runs.
"""

from __future__ import annotations

import re

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
    if value.endswith(".git") or value.endswith(".lock"):
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


def path_in_repo(value: str) -> str:
    """A relative file path inside a repo: '/'-separated, no empty, '.' or '..' segments, no backslash or NUL."""
    if not isinstance(value, str) or not value:
        raise bad_request("Empty path in repo")
    if "\x00" in value or "\\" in value:
        raise bad_request(f"Invalid path {value!r}: NUL and backslash are not allowed")
    if value.startswith("/"):
        raise bad_request(f"Invalid path {value!r}: absolute paths are not allowed")
    segments = value.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise bad_request(f"Invalid path {value!r}: empty, '.' and '..' segments are not allowed")
    if any(segment == ".git" for segment in segments):
        raise bad_request(f"Invalid path {value!r}: '.git' is reserved")
    if any(ord(ch) < 0x20 for ch in value):
        raise bad_request(f"Invalid path {value!r}: control characters are not allowed")
    return value
