"""``kernels/``, ``hub_client/``, ``tutorials/`` and ``benchmarks/`` use only nki_dsl's public names (DESIGN.md,
"The flow of a kernel"; issue 8), and hub_client only huggingface_hub's.

nki_dsl's public names are what ``nki_dsl/__init__.py`` exports (``__all__``) and, in its public subpackages (the
modules among those exports: ``language``, ``isa``, ``typing``, ``compiler``), their ``__all__`` or, without one,
every name their ``__init__`` binds that does not start with ``_``. A submodule a package merely contains
(``nki_dsl.language.memory``) is private unless the package binds it by name (``nl.tile_size``).

The scan is over the source (ast), so a deferred import inside a function counts as much as one at the top. It
follows the aliases a file binds (``import nki_dsl as nki``, ``import nki_dsl.language as nl``,
``from nki_dsl import isa as nisa``) and checks every attribute read through one (``nki.trace``, ``nl.tile_size.pmax``).
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("kernels", "hub_client", "tutorials", "benchmarks")
PACKAGE = "nki_dsl"


def _bound_in_init(module: types.ModuleType) -> set[str]:
    """The names a package's ``__init__.py`` binds itself (imports, assignments, defs, classes)."""
    tree = ast.parse(Path(module.__file__).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                names |= {n for n in dir(module) if not isinstance(getattr(module, n), types.ModuleType)}
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _public_names(module: types.ModuleType) -> set[str]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return set(exported)
    if module.__file__.endswith("__init__.py"):
        return {n for n in _bound_in_init(module) if not n.startswith("_") and hasattr(module, n)}
    return {n for n in dir(module) if not n.startswith("_")}


def _public_modules() -> dict[str, set[str]]:
    """Public module path -> its public names."""
    root = importlib.import_module(PACKAGE)
    out = {PACKAGE: _public_names(root)}
    for name in sorted(out[PACKAGE]):
        value = getattr(root, name)
        if isinstance(value, types.ModuleType):
            out[value.__name__] = _public_names(value)
            for sub in sorted(out[value.__name__]):  # nl.tile_size
                inner = getattr(value, sub)
                if isinstance(inner, types.ModuleType) and inner.__name__.startswith(PACKAGE):
                    out[inner.__name__] = _public_names(inner)
    return out


PUBLIC = _public_modules()


def _submodule(module: str, name: str) -> str | None:
    """The public module ``module.name`` refers to, if it is one."""
    value = getattr(importlib.import_module(module), name, None)
    if isinstance(value, types.ModuleType) and value.__name__ in PUBLIC:
        return value.__name__
    return None


def violations(path: Path, root: Path = ROOT) -> list[str]:
    """Every use of a non-public nki_dsl name in one file, as ``file:line: name``."""
    tree = ast.parse(path.read_text(), str(path))
    rel = path.relative_to(root)
    aliases: dict[str, str] = {}  # local name -> public nki_dsl module it is bound to
    found = []

    def bad(node, what):
        found.append(f"{rel}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != PACKAGE:
                    continue
                if a.name not in PUBLIC:
                    bad(node, f"import {a.name}")
                elif a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases[PACKAGE] = PACKAGE
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            if node.level or node.module not in PUBLIC:
                bad(node, f"from {node.module} import ...")
                continue
            for a in node.names:
                if a.name not in PUBLIC[node.module]:
                    bad(node, f"from {node.module} import {a.name}")
                elif (sub := _submodule(node.module, a.name)) is not None:
                    aliases[a.asname or a.name] = sub
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [], node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in aliases:
            continue
        module = aliases[base.id]
        for attr in chain:  # nl.tile_size.pmax: each step must be public in the module before it
            if module not in PUBLIC:
                break
            if attr not in PUBLIC[module]:
                bad(node, f"{module}.{attr}")
                break
            module = _submodule(module, attr) or ""
    return sorted(set(found))


def _files():
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("folder", SCANNED)
def test_only_public_nki_dsl_names(folder):
    found = [v for p in _files() if p.relative_to(ROOT).parts[0] == folder for v in violations(p)]
    assert not found, "private nki_dsl names used outside the core:\n" + "\n".join(found)


def hf_private_uses(path: Path, root: Path = ROOT) -> list[str]:
    """Private huggingface_hub modules or attributes one file uses (``huggingface_hub.utils._http``, or ``_GLOBAL_...``
    read through a name bound to a huggingface_hub module): private state changes without notice on an upgrade."""
    found, aliases = [], set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("huggingface_hub")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("huggingface_hub"):
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            aliases |= {a.asname or a.name for a in node.names}
        for m in modules:
            if m.startswith("huggingface_hub") and any(part.startswith("_") for part in m.split(".")):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {m}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {base.id}...{node.attr}")
    return found


def test_hub_client_uses_no_private_huggingface_hub_state():
    found = [v for path in sorted((ROOT / "hub_client").rglob("*.py")) for v in hf_private_uses(path)]
    assert not found, "private huggingface_hub names used by hub_client:\n" + "\n".join(found)


def test_the_scan_sees_private_names(tmp_path):
    """The checker itself: each spelling of a private use is reported, public uses are not."""
    source = (
        "import nki_dsl as nki\n"
        "import nki_dsl.language as nl\n"
        "from nki_dsl import isa as nisa\n"
        "from nki_dsl.targets import get_target\n"  # 4: a private module
        "import nki_dsl.backends.simulator\n"  # 5
        "from nki_dsl.language import load, memory\n"  # 6: memory is a submodule nl does not bind
        "def f():\n"
        "    from nki_dsl.ir.parser import parse_kernel\n"  # 8: deferred imports count
        "    nki.trace, nl.tile_size.pmax, nisa.iota\n"
        "    return nki.api, nl.tile_size._private\n"  # 10: two private attributes
    )
    path = tmp_path / "sample.py"
    path.write_text(source)
    found = violations(path, tmp_path)
    assert [v.split(":")[1] for v in found] == ["10", "10", "4", "5", "6", "8"], found


def test_the_huggingface_hub_scan_sees_private_state(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(
        "import huggingface_hub\n"
        "from huggingface_hub import get_session, set_client_factory\n"
        "from huggingface_hub.utils import _http\n"  # 3: a private module
        "from huggingface_hub.utils._http import hf_request_event_hook\n"  # 4
        "def f():\n"
        "    get_session(), set_client_factory(None)\n"
        "    return huggingface_hub.utils._http._GLOBAL_CLIENT_FACTORY, _http._GLOBAL_CLIENT\n"  # 7: three reads
    )
    found = hf_private_uses(path, tmp_path)
    assert sorted(int(v.split(":")[1]) for v in found) == [3, 4, 4, 7, 7, 7], found


def test_the_dimension_error_is_reachable_from_every_front_end():
    """``InconclusiveDimensionError`` (a shape family's kernel needing a dimension's concrete value; JAX's
    ``InconclusiveDimensionOperation``) is one class, defined with the other errors and exported by the package a
    kernel author imports, legacy (``nki_dsl``) or current (``nki_dsl.current``, what ``import nki`` is under
    ``nki_dsl.compat``), and raised when a family trace of a current-API kernel needs one."""
    import nki_dsl
    import nki_dsl.current as cnki
    import nki_dsl.current.language as cnl
    from nki_dsl import errors

    assert nki_dsl.InconclusiveDimensionError is errors.InconclusiveDimensionError is cnki.InconclusiveDimensionError
    assert "InconclusiveDimensionError" in nki_dsl.__all__ and "InconclusiveDimensionError" in cnki.__all__
    assert issubclass(cnki.InconclusiveDimensionError, cnki.NkiTraceError)

    @cnki.jit
    def rows_by_count(x):
        out = cnl.ndarray(x.shape, x.dtype, buffer=cnl.shared_hbm)
        if x.shape[0] > 64:  # a Python decision the range 1..128 does not settle
            return out
        return out

    spec = nki_dsl.spec(("N", 8), "float32", dims={"N": (1, 128)})
    with pytest.raises(cnki.InconclusiveDimensionError, match="dimension N is symbolic"):
        nki_dsl.trace(rows_by_count, spec, target="trn2")
