"""Program-order facts several rules share: each op's position and enclosing loops, where each tensor is defined
and used, and how long each on-chip tensor stays live.

Built in one walk over the kernel (linear in its size). ``verify_kernel`` builds it once per run (``shared``);
a rule called on its own builds a fresh one.
"""

from __future__ import annotations

import contextvars
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from nki_dsl.ir.nodes import Access, Kernel, Loop, Op, Tensor


@dataclass(frozen=True, eq=False)
class Site:
    """An op at position ``pos`` of the program order, inside ``loops`` (outermost first)."""

    op: Op
    loops: tuple[Loop, ...]
    pos: int


@dataclass(frozen=True, eq=False)
class Use:
    """Operand ``name`` of the op at ``site`` reads or writes ``access``."""

    site: Site
    name: str
    access: Access


@dataclass(frozen=True)
class Live:
    """``tensor`` is live over the program positions ``[start, end]``."""

    tensor: Tensor
    site: Site
    start: int
    end: int


class Program:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.sites: list[Site] = []
        self.loop_start: dict[Loop, int] = {}  # position of a loop's first op (its last op's, if it has none)
        self.loop_end: dict[Loop, int] = {}
        self.defs: dict[Tensor, Site] = {}
        self.uses: dict[Tensor, list[Use]] = defaultdict(list)
        self._walk(kernel.body, ())

    def _walk(self, body, loops: tuple[Loop, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, Loop):
                self.loop_start[stmt] = len(self.sites)
                self._walk(stmt.body, loops + (stmt,))
                self.loop_end[stmt] = len(self.sites) - 1
                continue
            site = Site(stmt, loops, len(self.sites))
            self.sites.append(site)
            for name, value in stmt.operands.items():
                if isinstance(value, Access):
                    self.uses[value.tensor].append(Use(site, name, value))
            if stmt.result is not None:
                self.defs.setdefault(stmt.result, site)

    def accesses(self) -> Iterator[tuple[Site, str, Access]]:
        for site in self.sites:
            for name, value in site.op.operands.items():
                if isinstance(value, Access):
                    yield site, name, value

    def live_ranges(self, buffer: str) -> list[Live]:
        """Live ranges of the tensors defined in ``buffer``: from the defining op to the last use. A use inside a
        loop that does not enclose the definition keeps the tensor live until that loop ends (every iteration
        needs it). A tensor defined in a loop body counts once: the body is one region, not one per iteration."""
        out = []
        for t, site in self.defs.items():
            if t.type.buffer.value != buffer:
                continue
            end = site.pos
            for use in self.uses.get(t, ()):
                end = max(end, self._use_end(site, use.site))
            out.append(Live(t, site, site.pos, end))
        return out

    def _use_end(self, def_site: Site, use_site: Site) -> int:
        k = common_depth(def_site.loops, use_site.loops)
        if k < len(use_site.loops):
            return self.loop_end[use_site.loops[k]]
        return use_site.pos


def common_depth(a: tuple[Loop, ...], b: tuple[Loop, ...]) -> int:
    """How many outer loops two sites share."""
    k = 0
    while k < len(a) and k < len(b) and a[k] is b[k]:
        k += 1
    return k


_shared: contextvars.ContextVar[Program | None] = contextvars.ContextVar("nki_verify_program", default=None)


def program(kernel: Kernel) -> Program:
    """The facts for ``kernel``: the ones ``shared`` built for this verify run, or fresh ones."""
    cached = _shared.get()
    if cached is not None and cached.kernel is kernel:
        return cached
    return Program(kernel)


@contextmanager
def shared(kernel: Kernel):
    token = _shared.set(Program(kernel))
    try:
        yield
    finally:
        _shared.reset(token)
