"""The first-party import graph of a package, read from source (``ast``), so nothing is imported to build it.

Every ``import`` / ``from ... import`` counts, at module level and inside functions (a deferred import is still
a dependency, only a later one), relative ones resolved. ``from package import name`` is an edge to the submodule
``package.name`` when that module exists, else to ``package``.

Run ``python -m tests.architecture.module_graph`` for the summary the layer contract is reported with: modules
per layer, the edges between layers, and the deferred imports with their reasons.
"""

from __future__ import annotations

import ast
import pathlib
from collections import Counter
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    imported: str  # module name
    path: pathlib.Path
    line: int
    deferred: bool  # inside a function
    reason: str  # for a deferred import: the text of its `# deferred:` comment ("" when there is none)


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str, root: pathlib.Path = ROOT) -> dict[str, pathlib.Path]:
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def _deferred_reason(lines: list[str], line: int) -> str:
    """The ``# deferred: why`` comment on the import's line, or above it on a comment line heading the block of
    imports it belongs to."""
    k = line - 1
    while k >= 0:
        text = lines[k].strip()
        if "# deferred:" in text:
            return text.split("# deferred:", 1)[1].strip()
        if k < line - 1 and not text.startswith(("#", "from ", "import ")):
            return ""
        k -= 1
    return ""


def imports(package: str, root: pathlib.Path = ROOT) -> list[Import]:
    known = modules(package, root)
    found = []
    for name, path in known.items():
        source = path.read_text()
        tree, lines = ast.parse(source), source.splitlines()
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                       for n in ast.walk(f)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            deferred = id(node) in in_function
            reason = _deferred_reason(lines, node.lineno) if deferred else ""
            for t in targets:
                if t == package or t.startswith(package + "."):
                    found.append(Import(name, t, path, node.lineno, deferred, reason))
    return found


def summary(package: str, layer_of, root: pathlib.Path = ROOT) -> str:
    """Modules per layer, import counts between layers, and the deferred imports (``layer_of(module)``)."""
    mods = modules(package, root)
    edges = imports(package, root)
    per_layer = Counter(layer_of(m) for m in mods)
    between = Counter((layer_of(e.importer), layer_of(e.imported)) for e in edges
                      if layer_of(e.importer) != layer_of(e.imported))  # fmt: skip
    statements = {(e.path, e.line): e.deferred for e in edges}
    out = [f"{len(mods)} modules, {len(statements)} first-party import statements "
           f"({sum(statements.values())} deferred, inside functions)"]
    out += [f"  {layer:12} {n:3} modules" for layer, n in per_layer.items()]
    out.append("imports between layers (importer -> imported: count):")
    out += [f"  {a} -> {b}: {n}" for (a, b), n in sorted(between.items())]
    out.append("deferred imports:")
    shown = {(e.path, e.line): e for e in edges if e.deferred}
    out += [f"  {e.path.relative_to(root)}:{e.line} {e.imported}: {e.reason or '(no reason given)'}"
            for e in shown.values()]  # fmt: skip
    return "\n".join(out)


if __name__ == "__main__":
    from tests.architecture.test_core_layers import layer_of

    print(summary("nki_dsl", layer_of))
