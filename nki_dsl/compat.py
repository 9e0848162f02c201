"""Run code written for AWS's NKI stack unmodified: ``import nki`` / ``import neuronxcc.nki`` resolve to nki_dsl.

    python -m nki_dsl.compat my_kernels.py [args...]
    python -m nki_dsl.compat -m pytest tests/ [pytest args...]

or, in Python, ``nki_dsl.compat.install()`` before the imports. The mapping:

* ``nki``, ``nki.language``, ``nki.isa``, ``nki.isa.constants`` -> ``nki_dsl.current`` (the 0.6 API);
* ``neuronxcc.nki`` and ``neuronxcc.nki.<sub>`` -> ``nki_dsl`` and ``nki_dsl.<sub>`` (the legacy API);
  ``neuronxcc`` itself is an empty package holding ``nki``.

A meta path finder does it: aliased names import the very module objects of nki_dsl (``nki.language is
nki_dsl.current.language``), so a kernel module sees one language whichever spelling it imports. A real
installed ``nki`` or ``neuronxcc`` (found on ``sys.path``) is never shadowed silently: ``install()`` leaves that
name alone and warns, unless called with ``force=True`` (which warns too).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import runpy
import sys
import types
import warnings

# alias prefix -> nki_dsl module it stands for
ALIASES = {"nki": "nki_dsl.current", "neuronxcc.nki": "nki_dsl"}
ROOTS = {"nki": "nki", "neuronxcc": "neuronxcc"}  # top-level names the finder may take over


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str | None):
        self.target = target  # None: the empty ``neuronxcc`` package

    def create_module(self, spec):
        if self.target is None:
            module = types.ModuleType(spec.name, "nki_dsl.compat: the neuronxcc package holding neuronxcc.nki")
            module.__path__ = []
            return module
        module = importlib.import_module(self.target)
        self._own_spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module) -> None:
        if self.target is not None:
            # The import system stamps the alias spec on the module; the module keeps its own identity.
            module.__spec__ = self._own_spec


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``nki...`` and ``neuronxcc...`` as nki_dsl modules, for the roots it was given."""

    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.split(".")[0]
        if root not in self.roots:
            return None
        if fullname == "neuronxcc":
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(None), is_package=True)
        for alias, real in ALIASES.items():
            if fullname == alias or fullname.startswith(alias + "."):
                name = real + fullname[len(alias):]
                if importlib.util.find_spec(name) is None:
                    return None  # nki.no_such_module: ModuleNotFoundError as usual
                return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name), is_package=True)
        return None


_installed: AliasFinder | None = None


def _real_installation(root: str) -> str | None:
    """Where a real ``root`` package is installed on sys.path, if anywhere."""
    spec = importlib.machinery.PathFinder.find_spec(root)
    if spec is None:
        return None
    return spec.origin or ", ".join(spec.submodule_search_locations or []) or root


def install(force: bool = False) -> AliasFinder:
    """Make ``import nki`` and ``import neuronxcc.nki`` resolve to nki_dsl (idempotent). Returns the finder."""
    global _installed
    if _installed is not None:
        return _installed
    roots = set()
    for root in ROOTS:
        where = _real_installation(root)
        if root in sys.modules and not _is_ours(sys.modules[root]):
            where = where or "already imported"
        if where is None:
            roots.add(root)
        elif force:
            warnings.warn(f"nki_dsl.compat: shadowing the installed '{root}' ({where}) with nki_dsl (force=True)",
                          stacklevel=2)  # fmt: skip
            roots.add(root)
            for name in [n for n in sys.modules if n == root or n.startswith(root + ".")]:
                del sys.modules[name]
        else:
            warnings.warn(f"nki_dsl.compat: a real '{root}' is installed ({where}); 'import {root}' keeps importing "
                          f"it (install(force=True) aliases it to nki_dsl instead)", stacklevel=2)  # fmt: skip
    _installed = AliasFinder(roots)
    sys.meta_path.insert(0, _installed)
    return _installed


def uninstall() -> None:
    """Remove the finder and the aliased modules from ``sys.modules`` (nki_dsl's own modules stay)."""
    global _installed
    if _installed is None:
        return
    sys.meta_path.remove(_installed)
    for name in [n for n in sys.modules if n.split(".")[0] in _installed.roots]:
        del sys.modules[name]
    _installed = None


def _is_ours(module) -> bool:
    """An aliased module is nki_dsl's own, or the empty ``neuronxcc`` package this module made."""
    spec = getattr(module, "__spec__", None)
    return getattr(module, "__name__", "").startswith("nki_dsl") or isinstance(getattr(spec, "loader", None),
                                                                               _AliasLoader)


USAGE = "usage: python -m nki_dsl.compat <script.py> [args...] | -m <module> [args...]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1], *argv[2:]]
        try:
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        except SystemExit as e:  # pytest and friends exit with their status
            return _status(e.code)
        return 0
    sys.argv = argv
    sys.path.insert(0, _script_dir(argv[0]))
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        return _status(e.code)
    return 0


def _script_dir(path: str) -> str:
    import os

    return os.path.dirname(os.path.abspath(path))


def _status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
