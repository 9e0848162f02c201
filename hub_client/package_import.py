"""Importing a kernel package's Python from a directory, under a private module name.

Both ends import a package this way: the bundle builder (the publisher's own package, to trace it) and the
loader (a release's published source, with trust). A private name keeps several copies (versions) apart in one
process, and the package's files still import each other relatively.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path


def import_package_dir(name: str, package_dir: Path):
    """The package at ``package_dir`` imported as ``name`` (once per process); a failed import leaves nothing of
    it in ``sys.modules``, so a retry runs it afresh."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        raise
    return module


def function_at(package, ref: str):
    """The function a ``"module:function"`` ref names inside an imported package (ImportError or AttributeError
    if there is none)."""
    module_name, _, fn_name = ref.partition(":")
    return getattr(importlib.import_module(f"{package.__name__}.{module_name}"), fn_name)
