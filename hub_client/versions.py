"""Release versions: full versions are tags ``v<major>.<minor>.<patch>`` (immutable), majors are branches
``v<major>`` (the HF kernels convention). ``version=1`` means the newest release tag of major 1."""

from __future__ import annotations

import re

TAG = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
BRANCH = re.compile(r"^v(0|[1-9][0-9]*)\Z")


def parse_tag(name: str) -> tuple[int, int, int] | None:
    m = TAG.match(name)
    return tuple(int(g) for g in m.groups()) if m else None


def tag_name(version: str) -> str:
    return f"v{version}"


def branch_name(major: int) -> str:
    return f"v{major}"


def releases(tags: dict[str, str]) -> list[tuple[tuple[int, int, int], str, str]]:
    """(version, tag, commit) of every release tag, oldest first."""
    out = [(v, name, commit) for name, commit in tags.items() if (v := parse_tag(name)) is not None]
    return sorted(out)


def newest(tags: dict[str, str], major: int) -> tuple[str, str] | None:
    """(tag, commit) of the newest release of ``major``."""
    found = [(name, commit) for v, name, commit in releases(tags) if v[0] == major]
    return found[-1] if found else None
