"""A library package cut down to some of its entry points' shape families, for tests that publish them: the whole
vit-attn package traces some 80 specialisations, a test of one family needs one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).parents[2] / "kernels"


def families_only(name: str, dest: Path, entry_points: set[str], keep=lambda line: True) -> Path:
    """A copy of ``kernels/<name>`` whose kernel.toml lists only ``entry_points``, each with only its families (the
    specialisation lines with ``dims``) that ``keep(line)`` accepts."""
    return lines_only(name, dest, entry_points, lambda entry, line: "dims =" in line and keep(line))


def lines_only(name: str, dest: Path, entry_points: set[str], keep) -> Path:
    """A copy of ``kernels/<name>`` whose kernel.toml lists only ``entry_points``, each with only the specialisation
    lines (concrete or families) that ``keep(entry, line)`` accepts."""
    root = dest / name
    shutil.copytree(ROOT / name, root, ignore=shutil.ignore_patterns("__pycache__"))
    sections = re.split(r"(?m)^(?=\[)", (root / "kernel.toml").read_text())
    out = []
    for section in sections:
        head = section.split("\n", 1)[0]
        m = re.fullmatch(r"\[entry-points\.(\w+)\]", head)
        if m and m.group(1) not in entry_points:
            continue
        if m:
            entry = m.group(1)
            section = "\n".join(ln for ln in section.split("\n")
                                if not ln.lstrip().startswith("{ args") or keep(entry, ln))  # fmt: skip
        out.append(section)
    (root / "kernel.toml").write_text("".join(out))
    return root
