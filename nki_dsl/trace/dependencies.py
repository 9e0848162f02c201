"""What a kernel's body can reach from Python, fingerprinted for its trace cache key.

A kernel's trace depends on its own source and on everything else its body reads while it runs once: the code of
the helpers it runs inline (sub-kernels, ``@nki.jit(mode='trace')``, and plain Python functions) and the Python
values they read (a module-level ``TILE = 128``, ``ACT = nl.exp``, a config object's fields). Rebinding or editing
any of them (a notebook cell run again, a module reloaded, a test swapping a helper) must retrace the callers that
were traced with the old one, so the key includes a fingerprint of what the body can reach, walked the way Python
code reaches it:

- from a function: the globals and closure cells its code names (also inside nested functions and
  comprehensions), its default arguments, and the attributes named by its code of the modules it names;
- from a container: its items (dicts, lists, tuples, sets);
- from ``functools.partial``: the function and the bound arguments; from a bound method: the function and the
  object; from a class: its methods and class attributes; from an object of a user class: its class and its
  instance attributes.

Leaves are keyed by value (numbers, strings, dtypes, enum members), functions by their code object (CPython
compares and hashes code objects by bytecode, constants and names, so an edited body differs), sub-kernels by
their source hash, and library functions and classes (this package, the standard library, installed packages:
part of the installed version, not of the kernel) by qualified name without walking into them. Objects of
library types (a NumPy array held in a global) are keyed by type only: their contents are data, not code.

The walk is bounded (``_MAX_NODES`` values, ``_MAX_ITEMS`` per container or object: a kernel reaching more is
keyed on the first ones) and cycle-safe (a value seen before is recorded as a back reference).
"""

from __future__ import annotations

import enum
import functools
import sys
import sysconfig
import types

import numpy as np

_MAX_NODES = 2000  # values visited in one fingerprint: bounds the per-launch cost of an object graph
_MAX_ITEMS = 200  # items read from one container or one object's attributes


def helper_fingerprint(fn, *roots) -> int:
    """A hash of what ``fn``'s code (and each of ``roots``, e.g. function-valued kernel arguments) can reach (see
    the module docstring); 0 when it reaches nothing."""
    walk = _Walk()
    walk.code_of(fn, fn.__name__)
    for k, root in enumerate(roots):
        walk.visit(f"<arg {k}>", root, ())
    return hash(tuple(walk.out)) if walk.out else 0


# Library code is part of the installed version, not of the kernel: its functions are not walked (nl.load's own
# code is not a helper of every kernel that loads).
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})
_LIBRARY_PACKAGES = ("nki_dsl", "neuronxcc", "nki", "builtins", "numpy", "ml_dtypes", "jax", "jaxlib")
_SCALARS = (type(None), bool, int, str, bytes)
_SKIPPED_CLASS_ENTRIES = frozenset({"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__",
                                    "__annotations__", "__dataclass_fields__", "__dataclass_params__",
                                    "__match_args__", "__slots__"})  # fmt: skip


@functools.lru_cache(maxsize=500)
def _library_module_name(name: str) -> bool:
    if name.split(".")[0] in _LIBRARY_PACKAGES:
        return True
    module = sys.modules.get(name)
    if module is None or name == "__main__":  # a script, a notebook or a REPL: the user's code
        return False
    file = getattr(module, "__file__", None) or ""
    return not file or file.startswith(_LIBRARY_DIRS)  # a built-in / frozen module, or an installed one


def _library_function(fn: types.FunctionType) -> bool:
    return _library_module_name(fn.__module__ or "") or fn.__code__.co_filename.startswith(_LIBRARY_DIRS)


def _is_jit(value) -> bool:
    # duck-typed: nki_dsl.trace.jit imports this module, and the current API's kernels subclass JitKernel
    return hasattr(value, "source_hash") and isinstance(getattr(value, "fn", None), types.FunctionType)


_CODE_KEYS: dict[int, tuple[types.CodeType, int]] = {}  # id -> (the code, kept alive so the id stays its, hash)


def _code_key(code: types.CodeType) -> int:
    """``hash(code)``, remembered per code object: hashing a code object walks its bytecode and constants (~20 us)
    and code objects are immutable, so the hash of one seen before is looked up instead."""
    entry = _CODE_KEYS.get(id(code))
    if entry is None or entry[0] is not code:
        if len(_CODE_KEYS) >= 5000:  # bounded: a process defining many functions forgets the old ones
            _CODE_KEYS.clear()
        entry = _CODE_KEYS[id(code)] = (code, hash(code))
    return entry[1]


@functools.lru_cache(maxsize=1024)
def _names(code: types.CodeType) -> tuple[str, ...]:
    """The global, attribute and free-variable names ``code`` and its nested code objects use (sorted)."""
    names = set(code.co_names) | set(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= set(_names(c))
    return tuple(sorted(names))


def _leaf(value):
    """The by-value key of a value with no code in it, or None when ``value`` is not such a leaf."""
    if isinstance(value, enum.Enum):  # first: IntEnum / str-Enum members are also ints / strings
        return ("enum", type(value).__module__, type(value).__qualname__, value.name)
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, float | complex):
        return (type(value).__name__, repr(value))  # repr: nan keys equal to nan, -0.0 differs from 0.0
    if isinstance(value, np.dtype):
        return ("dtype", value.str, value.name)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, repr(value.item()))
    return None


class _Walk:
    def __init__(self):
        self.out: list[tuple] = []
        self.seen: dict[int, int] = {}  # id -> index of its first record (the values stay alive during the walk)

    def visit(self, path: str, value, names: tuple[str, ...]) -> None:
        """Record ``value`` (reached at ``path``) and walk what it holds; ``names`` are the names the code that
        reached it uses (the attributes it may read of a module)."""
        if len(self.out) >= _MAX_NODES:
            return
        leaf = _leaf(value)
        if leaf is not None:
            self.out.append((path, leaf))
            return
        if id(value) in self.seen:
            self.out.append((path, ("same", self.seen[id(value)])))
            return
        self.seen[id(value)] = len(self.out)
        if _is_jit(value):
            self.out.append((path, ("kernel", value.source_hash)))
            self.code_of(value.fn, path)
        elif isinstance(value, types.FunctionType):
            if _library_function(value):
                self.out.append((path, ("lib", value.__module__, value.__qualname__)))
                return
            self.out.append((path, ("fn", _code_key(value.__code__))))
            self.code_of(value, path)
        elif isinstance(value, types.ModuleType):
            self.module(path, value, names)
        elif isinstance(value, functools.partial):
            self.out.append((path, ("partial",)))
            self.visit(f"{path}.func", value.func, names)
            self.items(f"{path}.args", value.args, names)
            self.items(f"{path}.keywords", value.keywords, names)
        elif isinstance(value, types.MethodType):
            self.out.append((path, ("method",)))
            self.visit(f"{path}.__func__", value.__func__, names)
            self.visit(f"{path}.__self__", value.__self__, names)
        elif isinstance(value, staticmethod | classmethod):
            self.visit(f"{path}.__func__", value.__func__, names)
        elif isinstance(value, property):
            for part in ("fget", "fset", "fdel"):
                self.visit(f"{path}.{part}", getattr(value, part), names)
        elif isinstance(value, dict | types.MappingProxyType | list | tuple | set | frozenset):
            self.out.append((path, (type(value).__name__, len(value))))
            self.items(path, value, names)
        elif isinstance(value, type):
            self.cls(path, value, names)
        elif _library_module_name(type(value).__module__):
            # builtins, ufuncs, NumPy arrays, this package's objects: by what they are, not by their contents
            self.out.append((path, ("lib", type(value).__module__, type(value).__qualname__,
                                    getattr(value, "__qualname__", getattr(value, "__name__", None)))))  # fmt: skip
        else:  # an object of a user class: its class (the methods a call reaches) and its attributes
            self.out.append((path, ("obj",)))
            self.visit(f"{path}.__class__", type(value), names)
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict):
                self.items(path, attrs, names, attributes=True)

    def code_of(self, fn: types.FunctionType, path: str) -> None:
        """Walk the values ``fn``'s code names: closure cells, globals, defaults."""
        code = fn.__code__
        names = _names(code)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        g = fn.__globals__
        for name in names:
            if name in cells:
                try:
                    value = cells[name].cell_contents
                except ValueError:  # a cell not yet filled
                    continue
            elif name in g:
                value = g[name]
            else:
                continue
            self.visit(f"{path}:{name}", value, names)
        if fn.__defaults__:
            self.items(f"{path}.__defaults__", fn.__defaults__, names)
        if fn.__kwdefaults__:
            self.items(f"{path}.__kwdefaults__", fn.__kwdefaults__, names)

    def module(self, path: str, module: types.ModuleType, names: tuple[str, ...]) -> None:
        if _library_module_name(module.__name__):  # its members are the installed version's
            self.out.append((path, ("lib", module.__name__)))
            return
        self.out.append((path, ("module", module.__name__)))
        for attr in names:  # only what the naming code can read of it (helpers.rms_scale)
            if attr in module.__dict__:
                self.visit(f"{path}.{attr}", module.__dict__[attr], names)

    def cls(self, path: str, cls: type, names: tuple[str, ...]) -> None:
        if _library_module_name(cls.__module__):
            self.out.append((path, ("lib", cls.__module__, cls.__qualname__)))
            return
        self.out.append((path, ("class", cls.__module__, cls.__qualname__)))
        for k, base in enumerate(cls.__bases__):
            self.visit(f"{path}.__bases__[{k}]", base, names)
        entries = {k: v for k, v in vars(cls).items() if k not in _SKIPPED_CLASS_ENTRIES}
        self.items(path, entries, names, attributes=True)

    def items(self, path: str, container, names, attributes: bool = False) -> None:
        if isinstance(container, dict | types.MappingProxyType):
            pairs = container.items()
        elif isinstance(container, set | frozenset):  # unordered: sorted by key where the items allow it
            pairs = sorted(((_leaf(v) or ("id", id(v)), v) for v in container), key=lambda p: repr(p[0]))
        else:
            pairs = enumerate(container)
        for k, (key, item) in enumerate(pairs):
            if k >= _MAX_ITEMS or len(self.out) >= _MAX_NODES:
                self.out.append((path, ("truncated",)))
                return
            self.visit(f"{path}.{key}" if attributes else f"{path}[{key!r}]", item, names)
