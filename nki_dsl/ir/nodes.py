"""The kernel IR: tensors, accesses (views), ops, loops and the kernel itself.

* A ``Tensor`` is a named storage location: a kernel parameter, an explicit allocation, or the fresh tile an op
  produces. Names are unique in a kernel and printed as ``%name``.
* An ``Access`` is a view of a tensor: its own ``shape`` (axes ``d0..dn``) and, per tensor dimension, an affine
  index over those axes, enclosing loop indices and program ids.
* An ``Op`` names its spec in the op table (``nki_dsl.ir.ops``); operands are accesses or scalar immediates keyed
  by the operand names of that spec; attributes are typed values; ``result`` is the tile it creates, if any.
* A ``Loop`` is a region with a kind (``affine`` or ``sequential``), an index variable and a trip count. The two
  runtime kinds of the current API (``ir/runtime_loops.py``) also read a register, ``Loop.reads`` (an access of
  one integer element on chip): ``dynamic`` loops stop at its value read at entry, ``while`` loops run while it is
  non-zero, re-read before each iteration, a ``scalar_offset`` loop runs its body once with its index equal to the
  value. Their ``start``/``stop`` then declare the range every analysis works over.
* An op's ``mask_shape`` (``MaskShape``) is what the IR's mask cannot say: the extents of the index the kernel
  built the mask from. The tracer sets it; the text form does not keep it (the mask's meaning is its constraints
  over the axes, which the text holds exactly), so parsed IR has none. The ``mask-shape`` rule reads it.
* A shape family's kernel also has ``symbols`` (``ir/symbols.py``): its HBM tensor dimensions and loop stops may
  then be symbol names (``"$N"``) and its masks may use them. Only the printer, the parser, the family checks and
  ``ir/instantiate.py`` see such IR; everything else runs on the concrete kernels instantiated from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nki_dsl.errors import SourceLoc
from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.symbols import SymbolDef
from nki_dsl.ir.types import TensorType


@dataclass(eq=False)
class Tensor:
    name: str
    type: TensorType
    kind: str  # "param", "alloc" or "tile"

    def full_access(self) -> Access:
        return Access(self, tuple(Affine.var(f"d{k}") for k in range(len(self.type.shape))), self.type.shape)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type.describe()}"


@dataclass(frozen=True, eq=False)
class Access:
    tensor: Tensor
    index: tuple[Affine, ...]  # one per tensor dimension
    shape: tuple[int, ...]  # extents of d0..d{len-1}

    @property
    def is_full(self) -> bool:
        t = self.tensor.type.shape
        return self.shape == t and all(e == Affine.var(f"d{k}") for k, e in enumerate(self.index))

    def vars(self) -> set[str]:
        return set().union(*(e.vars() for e in self.index)) if self.index else set()

    def describe(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"{self.tensor.name}[{dims}] in '{self.tensor.type.buffer.value}'"


@dataclass(frozen=True)
class Imm:
    """A scalar immediate operand (Python number)."""

    value: float | int | bool


Operand = Access | Imm


@dataclass(frozen=True)
class MaskShape:
    """The shape of the index an op's mask was built from, aligned as the tracer aligned it (NumPy's broadcasting:
    leading 1s for missing axes): ``extents[k]`` is the mask's extent on axis ``d<k>`` of the space it ranges over,
    1 where it broadcasts. ``over`` names the operand whose axes that space is (a reduction's input, when the mask
    was written over it), or is None for the op's iteration space. ``d1 <= 0`` built from ``nl.arange(2)`` on the
    axis of extent 2 and from ``nl.arange(128)[:, None]`` right-aligned onto it read the same in the IR; only this
    tells them apart."""

    extents: tuple[int, ...]
    over: str | None = None
    built: tuple[int, ...] = ()  # the shape as the kernel built it, before alignment (for messages)


@dataclass(eq=False)
class Op:
    name: str
    operands: dict[str, Operand]
    attrs: dict[str, object]
    result: Tensor | None
    loc: SourceLoc
    mask: Mask | None = None
    mask_shape: MaskShape | None = None  # set by the tracer only (see MaskShape)


@dataclass(eq=False)
class Loop:
    kind: str  # "affine", "sequential", or a runtime kind: "dynamic", "while", "scalar_offset" (ir/runtime_loops.py)
    var: str  # "i<N>"
    start: int
    stop: int  # a runtime loop's declared bound: its largest stop (dynamic), trip count (while) or index + 1
    step: int
    body: list[Stmt]
    loc: SourceLoc
    reads: Access | None = None  # a runtime loop's register: its stop (dynamic) or its condition (while)

    @property
    def runtime(self) -> bool:
        """The loop's trip count is known only when it runs (``stop`` bounds it)."""
        return self.kind in ("dynamic", "while", "scalar_offset")

    @property
    def iterations(self) -> int:
        """The most iterations one entry runs: a ``scalar_offset`` loop runs once, at one index of its range."""
        return min(1, self.trip_count) if self.kind == "scalar_offset" else self.trip_count

    @property
    def trip_count(self) -> int:
        return max(0, -(-(self.stop - self.start) // self.step)) if self.step > 0 else 0

    @property
    def last(self) -> int:
        return self.start + (self.trip_count - 1) * self.step


Stmt = Op | Loop


@dataclass(eq=False)
class Kernel:
    name: str
    params: list[Tensor]
    body: list[Stmt]
    outputs: list[Tensor]
    grid: tuple[int, ...] = ()
    source_file: str = "<unknown>"
    constants: dict[str, object] = field(default_factory=dict)
    symbols: dict[str, SymbolDef] = field(default_factory=dict)  # a shape family's symbols, in definition order
    # NeuronCores the grid's programs run on at once: 2 for a current-API ``kernel[2]`` (its grid axis is the two
    # cores of an LNC=2 launch, which race on shared HBM: verify/rules/core_race.py), 1 for every other launch (a
    # legacy SPMD grid's programs run one after another, reference/nki.md §1.5). IR text: ``lnc 2`` after the grid.
    lnc: int = 1

    def walk(self):
        """Yield ``(stmt, enclosing_loops)`` for every statement in program order."""
        yield from _walk(self.body, ())


def _walk(body: list[Stmt], loops: tuple[Loop, ...]):
    for stmt in body:
        yield stmt, loops
        if isinstance(stmt, Loop):
            yield from _walk(stmt.body, loops + (stmt,))
