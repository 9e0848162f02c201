"""The helpers a kernel's body may call, fingerprinted for its trace cache key.

A kernel's trace depends on its own source and on the code of every helper its body runs inline: sub-kernels
(``@nki.jit(mode='trace')``, inlined into the caller's trace) and plain Python functions. Rebinding such a helper
(a notebook cell run again, a module reloaded, a test swapping it) must retrace the callers that were traced with
the old one, so the key includes a fingerprint of the helpers the body can reach by name: the globals and closure
cells its code names (also inside nested functions and comprehensions), attributes of modules it names
(``helpers.rms_scale``), and, transitively, what those helpers reach in turn.

A function is fingerprinted by its code object (CPython compares and hashes code objects by their bytecode,
constants and names, so an edited body differs) and a sub-kernel by its source hash. Helpers reached some other
way (stored in a dict or an object attribute the kernel reads) are not seen: such a helper's edit needs a new
kernel object.
"""

from __future__ import annotations

import functools
import sysconfig
import types

_MAX_HELPERS = 300  # a bound on the walk: kernels that reach more helpers than this are keyed on the first ones


def helper_fingerprint(fn) -> int:
    """A hash of the code of every helper ``fn`` can reach by name (see the module docstring); 0 when none."""
    seen: dict[int, object] = {}
    todo = [fn]
    out = []
    while todo and len(seen) < _MAX_HELPERS:
        f = todo.pop()
        for name, value in _named_values(f):
            target = getattr(value, "fn", None) if _is_jit(value) else value
            if not isinstance(target, types.FunctionType) or id(target) in seen or _library(target):
                continue
            seen[id(target)] = target
            out.append((name, value.source_hash if _is_jit(value) else hash(target.__code__)))
            todo.append(target)
    return hash(tuple(sorted(out))) if out else 0


# Library code (this package, the standard library, installed packages) is part of the installed version, not of
# the kernel: its functions are not walked (nl.load's own code is not a helper of every kernel that loads).
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})


def _library(fn: types.FunctionType) -> bool:
    module = fn.__module__ or ""
    return module.split(".")[0] in ("nki_dsl", "neuronxcc") or fn.__code__.co_filename.startswith(_LIBRARY_DIRS)


def _is_jit(value) -> bool:
    # duck-typed: nki_dsl.trace.jit imports this module, and the current API's kernels subclass JitKernel
    return hasattr(value, "source_hash") and isinstance(getattr(value, "fn", None), types.FunctionType)


@functools.lru_cache(maxsize=1024)
def _names(code: types.CodeType) -> tuple[str, ...]:
    """The global, attribute and free-variable names ``code`` and its nested code objects use (sorted)."""
    names = set(code.co_names) | set(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= set(_names(c))
    return tuple(sorted(names))


def _library_module(module: types.ModuleType) -> bool:
    file = getattr(module, "__file__", None) or ""
    return module.__name__.split(".")[0] in ("nki_dsl", "neuronxcc", "nki") or not file or file.startswith(
        _LIBRARY_DIRS)


def _named_values(fn: types.FunctionType):
    """``(name, value)`` for the globals, closure cells and module attributes ``fn``'s code names."""
    code = fn.__code__
    names = _names(code)
    scope = dict(zip(code.co_freevars, fn.__closure__ or ()))
    g = fn.__globals__
    for name in names:
        if name in scope:
            try:
                value = scope[name].cell_contents
            except ValueError:  # a cell not yet filled
                continue
        elif name in g:
            value = g[name]
        else:
            continue
        if isinstance(value, types.ModuleType):
            if _library_module(value):  # its functions are the installed version's, not the kernel's helpers
                continue
            for attr in names:
                member = getattr(value, attr, None)
                if isinstance(member, types.FunctionType) or _is_jit(member):
                    yield f"{name}.{attr}", member
        else:
            yield name, value
