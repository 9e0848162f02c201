"""Bundle paths are untrusted (they come from a manifest on the network): only plain relative POSIX paths made of
ordinary names may be joined onto a cache directory."""

from __future__ import annotations

import re

from hub_client.errors import UnsafePathError

# Ordinary file and directory names only: no shell or Windows specials, no leading dot-dot tricks.
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")


def check_bundle_path(path: object) -> str:
    """Return ``path`` if it is a safe relative path inside a bundle, else raise UnsafePathError naming why."""
    if not isinstance(path, str) or not path:
        raise UnsafePathError(f"bundle path {path!r}: must be a non-empty string")
    if "\x00" in path:
        raise UnsafePathError(f"bundle path {path!r}: contains a NUL byte")
    if "\\" in path:
        raise UnsafePathError(f"bundle path {path!r}: contains a backslash (paths use '/')")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise UnsafePathError(f"bundle path {path!r}: is absolute")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise UnsafePathError(f"bundle path {path!r}: has an empty, '.' or '..' component")
        if not _PART.match(part):
            raise UnsafePathError(f"bundle path {path!r}: component {part!r} has characters outside [A-Za-z0-9_.-]")
    return path
