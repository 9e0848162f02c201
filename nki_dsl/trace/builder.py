"""The trace-time builder: the kernel being recorded, its open loop regions, fresh names, and the target facts the
kernel body consulted.

One builder is active while a kernel body runs; ``nl``/``nisa`` calls find it through ``current()``. Calling
them with no active builder is an API misuse and says so.
"""

from __future__ import annotations

import contextvars
import functools
import os
import re
import sys
from contextlib import contextmanager

from nki_dsl.errors import NkiApiError, NkiTraceError, SourceLoc
from nki_dsl.ir.nodes import Kernel, Loop, Op, Stmt, Tensor
from nki_dsl.ir.types import TensorType
from nki_dsl.targets import Target

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_active: contextvars.ContextVar[Builder | None] = contextvars.ContextVar("nki_builder", default=None)


def current(api: str) -> Builder:
    """The active builder, or an error naming the API that was called outside a kernel."""
    builder = _active.get()
    if builder is None:
        raise NkiApiError(
            f"{_entry_point(api)} was called outside an NKI kernel; call it inside a function decorated with @nki.jit "
            f"and launch that kernel (kernel(...) or kernel[grid](...))",
            caller_loc(),
        )
    return builder


def is_tracing() -> bool:
    return _active.get() is not None


# The public namespaces of the kernel language and the aliases kernels import them as (nl.load, nisa.iota).
API_NAMESPACES = {
    "nki_dsl.language": "nl", "nki_dsl.isa": "nisa", "nki_dsl.current.language": "nl", "nki_dsl.current.isa": "nisa",
}


def _entry_point(op: str) -> str:
    """The public function the user called (``nl.zeros``), which may differ from the IR op it builds
    (``nl.full``): the outermost frame in this package, when it is a function of ``nl`` or ``nisa``."""
    frame, entry = sys._getframe(1), None
    while frame is not None and in_package(frame.f_code.co_filename):
        entry, frame = frame, frame.f_back
    if entry is None:
        return op
    for package, alias in API_NAMESPACES.items():
        fn = getattr(sys.modules.get(package), entry.f_code.co_name, None)
        if getattr(fn, "__code__", None) is entry.f_code:
            return f"{alias}.{entry.f_code.co_name}"
    return op


def in_package(filename: str) -> bool:
    """True for source files of nki_dsl itself (as opposed to kernels and the code that calls them)."""
    if os.path.isabs(filename):  # the answer cannot change: asked once per file (every traced op walks the stack)
        return _in_package_absolute(filename)
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)  # relative to a cwd that may change


@functools.lru_cache(maxsize=1024)
def _in_package_absolute(filename: str) -> bool:
    return os.path.normpath(filename).startswith(_PACKAGE_DIR + os.sep)


def caller_loc() -> SourceLoc:
    """The first stack frame outside this package: the kernel source line being traced."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not in_package(filename):
            return SourceLoc(filename, frame.f_lineno)
        frame = frame.f_back
    return SourceLoc("<unknown>", 0)


class Builder:
    def __init__(self, name: str, source_file: str, grid: tuple[int, ...], target: Target):
        self.kernel = Kernel(name=name, params=[], body=[], outputs=[], grid=grid, source_file=source_file)
        self._target = target
        self.facts: dict[str, object] = {}  # Target attribute -> the value the body read (see ``target_fact``)
        self.symbols = None  # a shape family's SymbolTable (trace/symbolic.py); None for a concrete trace
        self._regions: list[list[Stmt]] = [self.kernel.body]
        self._loops: list[Loop] = []
        self._names: set[str] = set()
        self._next_number = 0
        self.loop_count = 0

    @contextmanager
    def active(self):
        token = _active.set(self)
        try:
            yield self
        finally:
            _active.reset(token)

    # -- the target ------------------------------------------------------------------------------------------
    def target_fact(self, field: str):
        """Attribute ``field`` of the target being traced for, recorded: a trace that read target facts is reused
        only for targets with the same values (``nisa.get_nc_version``, ``nl.tile_size``), any other trace for
        every target."""
        value = getattr(self._target, field)
        self.facts[field] = value
        return value

    # -- names -----------------------------------------------------------------------------------------------
    def fresh_name(self, hint: str = "") -> str:
        """A unique tensor name: numbers for anonymous tiles, else the hint (``c_output``, then ``c_output_1``)."""
        if not hint:
            while str(self._next_number) in self._names:
                self._next_number += 1
            name = str(self._next_number)
        else:
            hint = re.sub(r"\W", "_", hint)
            hint = hint if not hint[0].isdigit() else f"t{hint}"
            name, k = hint, 1
            while name in self._names:
                name, k = f"{hint}_{k}", k + 1
        self._names.add(name)
        return name

    def new_tensor(self, type_: TensorType, kind: str, hint: str = "") -> Tensor:
        return Tensor(self.fresh_name(hint), type_, kind)

    def add_param(self, tensor: Tensor) -> None:
        self._names.add(tensor.name)
        self.kernel.params.append(tensor)

    # -- regions ---------------------------------------------------------------------------------------------
    def emit(self, op: Op) -> Op:
        self._regions[-1].append(op)
        return op

    def open_loop(self, kind: str, start: int, stop: int, step: int, loc: SourceLoc) -> Loop:
        loop = Loop(kind, f"i{self.loop_count}", start, stop, step, [], loc)
        self.loop_count += 1
        self._regions[-1].append(loop)
        self._regions.append(loop.body)
        self._loops.append(loop)
        return loop

    def close_loop(self, loop: Loop) -> None:
        # A body that raised leaves its generator unfinished; it may be closed later by the garbage collector,
        # after this builder has moved on. Only pop what is still ours.
        if self._loops and self._loops[-1] is loop:
            self._loops.pop()
            self._regions.pop()

    @property
    def loops(self) -> tuple[Loop, ...]:
        return tuple(self._loops)

    def check_open_loops(self) -> None:
        if self._loops:
            loop = self._loops[-1]
            raise NkiTraceError(f"loop {loop.var} was left open when the kernel returned", loop.loc)
