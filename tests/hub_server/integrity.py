"""After every test that ran a registry: every repository under its root passes `git fsck --strict`."""

from __future__ import annotations

import subprocess
from pathlib import Path


def repositories(root: Path) -> list[Path]:
    """Every bare repo under a registry root: `<root>/<type plural>/<org>/<name>` holding a HEAD file."""
    return sorted(head.parent for head in Path(root).glob("*/*/*/HEAD") if head.relative_to(root).parts[0] != ".tmp")


def assert_fsck_clean(root: Path) -> None:
    failures = []
    for repo in repositories(root):
        done = subprocess.run(["git", f"--git-dir={repo}", "fsck", "--strict", "--no-progress"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            failures.append(f"{repo.relative_to(root)}: {done.stdout}{done.stderr}".strip())
    assert not failures, "git fsck --strict found problems:\n" + "\n".join(failures)
