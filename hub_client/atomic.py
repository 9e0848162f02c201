"""Atomic file writes: readers see the old file or the new one, never a half-written one (temp file in the same
directory, fsync, then os.replace)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: str | Path, data) -> None:
    """A cache record: canonical JSON (sorted keys, one entry a line, so diffs of it read well), written atomically."""
    write_text(path, json.dumps(data, sort_keys=True, indent=1) + "\n")


def record_lock(path: str | Path):
    """The file lock that serialises read-modify-write cycles of the record at ``path`` (``<path>.lock``), across
    threads and processes; every writer of one record must take this same lock."""
    from filelock import FileLock

    return FileLock(f"{path}.lock")
