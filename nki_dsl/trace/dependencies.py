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

A launch needs the fingerprint every time, and walking ViT attention's body costs a few hundred microseconds, more
than the rest of a launch's Python. ``HelperFingerprint`` (one per ``@nki.jit`` kernel) records what its walk read
(``trace/reads.py``) and reuses the fingerprint while every read still finds the same object, which takes a few
microseconds; any change walks again.
"""

from __future__ import annotations

import enum
import functools
import operator
import sys
import sysconfig
import types

import numpy as np

from nki_dsl.trace.reads import MISSING, Reads, cell_value

_MAX_NODES = 2000  # values visited in one fingerprint: bounds the per-launch cost of an object graph
_MAX_ITEMS = 200  # items read from one container or one object's attributes


def helper_fingerprint(fn, *roots) -> int:
    """A hash of what ``fn``'s code (and each of ``roots``, e.g. function-valued kernel arguments) can reach (see
    the module docstring); 0 when it reaches nothing."""
    return _fingerprint(_Walk(), fn, roots)


def _fingerprint(walk: _Walk, fn, roots) -> int:
    walk.code_of(fn, fn.__name__)
    for k, root in enumerate(roots):
        walk.visit(f"<arg {k}>", root, ())
    return hash(tuple(walk.out)) if walk.out else 0


class HelperFingerprint:
    """``helper_fingerprint(fn, *roots)``, remembered with the reads its walk made: while each finds the object it
    found (and ``roots`` are the same objects), the same walk would give the same fingerprint, so it is not walked
    again (``trace/reads.py``)."""

    def __init__(self, fn):
        self.fn = fn
        self._last: tuple | None = None  # (reads, roots, fingerprint), replaced whole: launches from two threads
        self.walks = 0  # walks done (tests check that an unchanged kernel is not walked again)

    def __call__(self, *roots) -> int:
        last = self._last
        if last is not None:
            reads, seen, value = last
            if len(roots) == len(seen) and all(map(operator.is_, roots, seen)) and reads.same():
                return value
        self.walks += 1
        walk = _Walk(Reads())
        value = _fingerprint(walk, self.fn, roots)
        walk.reads.freeze()
        self._last = (walk.reads, roots, value)
        return value


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
    def __init__(self, reads: Reads | None = None):
        self.out: list[tuple] = []
        self.seen: dict[int, int] = {}  # id -> index of its first record (the values stay alive during the walk)
        self.reads = reads  # what the walk reads of mutable objects, recorded for HelperFingerprint

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
        reads = self.reads
        if _is_jit(value):
            if reads is not None:
                reads.label(value, "source_hash", value.source_hash)
                reads.attr(value, "fn", value.fn)
            self.out.append((path, ("kernel", value.source_hash)))
            self.code_of(value.fn, path)
        elif isinstance(value, types.FunctionType):
            if reads is not None:  # what decides whether it is library code
                reads.label(value, "__module__", value.__module__)
            if _library_function(value):
                if reads is not None:  # (a user function's code_of reads its __code__)
                    reads.attr(value, "__code__", value.__code__)
                    reads.label(value, "__qualname__", value.__qualname__)
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
            self.items(path, value, names)  # (it records the reads of a mutable one)
        elif isinstance(value, type):
            self.cls(path, value, names)
        elif _library_module_name(type(value).__module__):
            # builtins, ufuncs, NumPy arrays, this package's objects: by what they are, not by their contents
            if reads is not None:
                reads.attr(value, "__class__", type(value))
            self.out.append((path, ("lib", type(value).__module__, type(value).__qualname__,
                                    getattr(value, "__qualname__", getattr(value, "__name__", None)))))  # fmt: skip
        else:  # an object of a user class: its class (the methods a call reaches) and its attributes
            self.out.append((path, ("obj",)))
            attrs = getattr(value, "__dict__", None)
            if reads is not None:
                reads.attr(value, "__class__", type(value))
                reads.attr(value, "__dict__", MISSING if attrs is None else attrs)
            self.visit(f"{path}.__class__", type(value), names)
            if isinstance(attrs, dict):
                self.items(path, attrs, names, attributes=True)

    def code_of(self, fn: types.FunctionType, path: str) -> None:
        """Walk the values ``fn``'s code names: closure cells, globals, defaults."""
        code = fn.__code__
        names = _names(code)
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        g = fn.__globals__
        reads = self.reads
        if reads is not None:  # (__closure__ and __globals__ cannot be rebound; their cells and entries can)
            reads.attr(fn, "__code__", code)
            reads.attr(fn, "__defaults__", fn.__defaults__)
            reads.attr(fn, "__kwdefaults__", fn.__kwdefaults__)
        for name in names:
            if name in cells:
                value = cell_value(cells[name])
                if reads is not None:
                    reads.cell(cells[name], value)
                if value is MISSING:  # a cell not yet filled
                    continue
            else:
                value = g.get(name, MISSING)
                if reads is not None:
                    reads.name(g, name, value)  # absent too: defining it later changes what the body reads
                if value is MISSING:
                    continue
            self.visit(f"{path}:{name}", value, names)
        if fn.__defaults__:
            self.items(f"{path}.__defaults__", fn.__defaults__, names)
        if fn.__kwdefaults__:
            self.items(f"{path}.__kwdefaults__", fn.__kwdefaults__, names)

    def module(self, path: str, module: types.ModuleType, names: tuple[str, ...]) -> None:
        if self.reads is not None:
            self.reads.label(module, "__name__", module.__name__)
        if _library_module_name(module.__name__):  # its members are the installed version's
            self.out.append((path, ("lib", module.__name__)))
            return
        self.out.append((path, ("module", module.__name__)))
        members = module.__dict__
        for attr in names:  # only what the naming code can read of it (helpers.rms_scale)
            value = members.get(attr, MISSING)
            if self.reads is not None:
                self.reads.name(members, attr, value)
            if value is not MISSING:
                self.visit(f"{path}.{attr}", value, names)

    def cls(self, path: str, cls: type, names: tuple[str, ...]) -> None:
        reads = self.reads
        if reads is not None:
            reads.label(cls, "__module__", cls.__module__)
            reads.label(cls, "__qualname__", cls.__qualname__)
        if _library_module_name(cls.__module__):
            self.out.append((path, ("lib", cls.__module__, cls.__qualname__)))
            return
        self.out.append((path, ("class", cls.__module__, cls.__qualname__)))
        if reads is not None:
            reads.attr(cls, "__bases__", cls.__bases__)
        for k, base in enumerate(cls.__bases__):
            self.visit(f"{path}.__bases__[{k}]", base, names)
        members = vars(cls)
        if reads is not None:  # every entry, the skipped ones too (a few more identity checks)
            reads.length(members)
            for k, v in members.items():
                reads.name(members, k, v)
        entries = {k: v for k, v in members.items() if k not in _SKIPPED_CLASS_ENTRIES}
        self.items(path, entries, names, attributes=True, recorded=True)

    def items(self, path: str, container, names, attributes: bool = False, recorded: bool = False) -> None:
        """Walk ``container``'s items; a mutable one's reads are recorded (unless the caller ``recorded`` them)."""
        reads = None if recorded else self.reads
        if isinstance(container, dict | types.MappingProxyType):
            pairs = container.items()
            if reads is not None:
                reads.length(container)
        elif isinstance(container, set | frozenset):  # unordered: sorted by key where the items allow it
            pairs = sorted(((_leaf(v) or ("id", id(v)), v) for v in container), key=lambda p: repr(p[0]))
            if reads is not None and isinstance(container, set):
                reads.length(container)
                reads.set_members(container)
        else:
            pairs = enumerate(container)
            if reads is not None and isinstance(container, list):
                reads.length(container)
                reads.list_items(container, tuple(container[:_MAX_ITEMS]))
        for k, (key, item) in enumerate(pairs):
            if k >= _MAX_ITEMS or len(self.out) >= _MAX_NODES:
                self.out.append((path, ("truncated",)))
                return
            if reads is not None and isinstance(container, dict | types.MappingProxyType):
                reads.name(container, key, item)
            self.visit(f"{path}.{key}" if attributes else f"{path}[{key!r}]", item, names)
