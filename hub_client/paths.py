"""Bundle paths are untrusted (they come from a manifest on the network): only plain relative POSIX paths made of
ordinary names may be joined onto a cache directory."""

from __future__ import annotations

import re

from hub_client.errors import UnsafePathError

# Ordinary file and directory names only: no shell or Windows specials, no leading dot-dot tricks.
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


# What every file system the cache may live on holds (a longer name is OSError ENAMETOOLONG when the file is opened,
# not a refusal), and a bound on the whole path (and so on every message that names it).
MAX_PART = 255
MAX_PATH = 1024


def _shown(value: object) -> str:
    """``repr(value)`` for a message, cut short: a hostile manifest's paths are not echoed whole."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 100 else repr(value[:100]) + f"... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= 100 else text[:100] + "..."


def check_bundle_path(path: object) -> str:
    """Return ``path`` if it is a safe relative path inside a bundle, else raise UnsafePathError naming why."""
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"bundle path {_shown(path)}: must be a non-empty string")
    if len(path) > MAX_PATH:
        raise UnsafePathError(f"bundle path {_shown(path)}: is longer than {MAX_PATH} characters")
    if "\x00" in path:
        raise UnsafePathError(f"bundle path {_shown(path)}: contains a NUL byte")
    if "\\" in path:
        raise UnsafePathError(f"bundle path {_shown(path)}: contains a backslash (paths use '/')")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise UnsafePathError(f"bundle path {_shown(path)}: is absolute")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePathError(f"bundle path {_shown(path)}: has an empty, '.' or '..' component")
        if not _PART.match(part):
            raise UnsafePathError(f"bundle path {_shown(path)}: component {_shown(part)} has characters outside "
                                  f"[A-Za-z0-9_.-]")  # fmt: skip
        if len(part) > MAX_PART:
            raise UnsafePathError(f"bundle path {_shown(path)}: component {_shown(part)} is longer than {MAX_PART} "
                                  f"characters")  # fmt: skip
    return path
