"""Which current-API names a test function uses, read from its source (for docs/current_api_coverage.md's test).

A test uses ``nl.exp`` when its body (or a decorator, or a module-level function, class or variable it names, or
a definition of a repo module it imports, such as ``tests/current_api/lnc_kernels.py``, followed transitively) has
the attribute
``X.exp`` with ``X`` bound to the current ``nki.language`` (``import nki_dsl.current.language as nl``, or
``import nki.language as nl`` under ``nki_dsl.compat``), or names ``exp`` imported from it. Uses are dotted
strings in the table's spelling: ``nl.exp``, ``nisa.engine.vector``, ``nl.tile_size.pmax``,
``nisa.constants.oob_mode``, ``nki.simulate``; any other attribute is a method use, ``.reshape``. An alias bound to
two different modules in one file (``nl`` for the current API at the top, for the legacy one in a test) is not
trusted: it is dropped."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMESPACES = {
    "nki_dsl.current": "nki", "nki_dsl.current.language": "nl", "nki_dsl.current.isa": "nisa",
    "nki_dsl.current.isa.constants": "nisa.constants",
    "nki": "nki", "nki.language": "nl", "nki.isa": "nisa", "nki.isa.constants": "nisa.constants",
}  # fmt: skip
OTHER = "<not the current API>"  # a name also bound to another module


class FileIndex:
    """One Python file: its current-API aliases, the repo modules it imports, its module-level definitions."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.defs: dict[str, ast.AST] = {}  # module-level functions, classes and assigned names
        for n in self.tree.body:
            if isinstance(n, ast.FunctionDef | ast.ClassDef):
                self.defs[n.name] = n
            elif isinstance(n, ast.Assign | ast.AnnAssign):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    self.defs.update({x.id: n for x in ast.walk(t) if isinstance(x, ast.Name)})
        aliases: dict[str, set[str]] = {}  # local name -> dotted API prefix ("nl", "nl.exp")
        self.modules: dict[str, Path] = {}  # local name -> repo file
        self.imported: dict[str, tuple[Path, str]] = {}  # local name -> (repo file, its definition's name)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    bound = a.name if a.asname else local  # ``import a.b`` binds ``a``
                    aliases.setdefault(local, set()).add(NAMESPACES.get(bound, OTHER))
                    if a.asname and _repo_file(a.name) is not None:
                        self.modules[a.asname] = _repo_file(a.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    local, full = a.asname or a.name, f"{node.module}.{a.name}"
                    if full in NAMESPACES:
                        aliases.setdefault(local, set()).add(NAMESPACES[full])
                    elif node.module in NAMESPACES:
                        aliases.setdefault(local, set()).add(f"{NAMESPACES[node.module]}.{a.name}")
                    else:
                        aliases.setdefault(local, set()).add(OTHER)
                    if full in NAMESPACES or node.module in NAMESPACES:
                        continue
                    if _repo_file(full) is not None:
                        self.modules[local] = _repo_file(full)
                    elif _repo_file(node.module) is not None:
                        self.imported[local] = (_repo_file(node.module), a.name)
        self.aliases = {k: next(iter(v)) for k, v in aliases.items() if len(v) == 1 and OTHER not in v}

    def uses(self, name: str) -> frozenset[str]:
        """The API uses of the module-level definition ``name`` and of everything it names (transitively)."""
        return _uses(self.path, name)


def _repo_file(module: str) -> Path | None:
    if not module.startswith(("tests.", "kernels.")):
        return None
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return path if path.is_file() else None


@functools.cache
def index(path: Path) -> FileIndex:
    return FileIndex(path)


def _chain(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"] (None when the root is not a plain name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _spelled(use: str) -> str:
    """``nki.language.exp`` -> ``nl.exp``, ``nki.isa.x`` -> ``nisa.x``: the table's spelling."""
    for long, short in (("nki.language", "nl"), ("nki.isa", "nisa")):
        if use == long or use.startswith(long + "."):
            return short + use[len(long):]
    return use


@functools.cache
def _uses(path: Path, name: str, _seen: frozenset = frozenset()) -> frozenset[str]:
    file = index(path)
    if name not in file.defs or (path, name) in _seen:
        return frozenset()
    seen = _seen | {(path, name)}
    found: set[str] = set()
    for node in ast.walk(file.defs[name]):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] in file.aliases:
                found.add(_spelled(".".join([file.aliases[chain[0]], *chain[1:]])))
            elif chain and chain[0] in file.modules and len(chain) > 1:
                found |= _uses(file.modules[chain[0]], chain[1], seen)
            found.add("." + node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in file.aliases:
                found.add(file.aliases[node.id])
            elif node.id in file.defs:
                found |= _uses(path, node.id, seen)
            elif node.id in file.imported:
                found |= _uses(*file.imported[node.id], seen)
    return frozenset(found)


def uses(ref: str) -> frozenset[str] | None:
    """The uses of ``path::function`` (None if the file or its module-level function does not exist)."""
    rel, _, name = ref.partition("::")
    path = ROOT / rel
    if not path.is_file() or name not in index(path).defs:
        return None
    return index(path).uses(name)


def exercises(used: frozenset[str], api: str) -> bool:
    """``api`` (``nl.exp``, ``nisa.engine``, ``.reshape``) or one of its attributes is among ``used``."""
    return any(u == api or u.startswith(api + ".") for u in used)
