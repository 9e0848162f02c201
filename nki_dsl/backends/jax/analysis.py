"""What the JAX lowering needs to know about a kernel before tracing it: tensor types, reshape views, index
ranges, the tensors each loop writes and those read after it (which decide a loop's carried state)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nki_dsl.errors import NkiError
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.types import Buffer, TensorType

# The random generator's state, carried through loops like a tensor; not a string, so no tensor name is it.
RNG = ("rng",)
RANDOM_OPS = ("nl.dropout", "nl.random_seed", "nisa.dropout", "nisa.rng", "nisa.rand2", "nisa.set_rng_seed")


@dataclass
class KernelInfo:
    kernel: Kernel
    types: dict[str, TensorType] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)  # HBM view (ir/hbm_views.py) -> the tensor holding its storage
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # loop index / program id -> [lo, hi]
    written: dict[Loop, set] = field(default_factory=dict)  # loop (by identity) -> roots written inside it
    read_after: dict[Loop, set] = field(default_factory=dict)  # loop (by identity) -> roots read after it
    all_written: set = field(default_factory=set)  # roots written anywhere (the launch grid's carried state)
    written_params: list[str] = field(default_factory=list)  # parameters the kernel writes into
    refs: dict[str, int] = field(default_factory=dict)  # tensor name -> ops (and loop headers, outputs) naming it
    rerolled: dict = field(default_factory=dict)  # statement ids of a body -> its re-rolled form (reroll.plan)

    def root(self, name: str) -> str:
        return self.roots.get(name, name)

    @property
    def outputs(self) -> set:
        return {self.root(t.name) for t in self.kernel.outputs}


def _reads(op: Op, info: KernelInfo) -> set:
    names = {info.root(v.tensor.name) for v in op.operands.values() if isinstance(v, Access)}
    if op.name in RANDOM_OPS:
        names.add(RNG)
    return names


def written_by(op: Op, info: KernelInfo) -> set:
    """The roots ``op`` writes (its result, the operands it writes, the generator state)."""
    spec = OPS.get(op.name)
    if spec is None:
        raise NkiError(f"the JAX backend has no lowering for {op.name!r}", op.loc)
    names = set()
    if op.result is not None and op.name not in VIEW_OPS:
        names.add(info.root(op.result.name))
    for o in spec.writes:
        v = op.operands.get(o.name)
        if isinstance(v, Access):
            names.add(info.root(v.tensor.name))
    if op.name in RANDOM_OPS:
        names.add(RNG)
    return names


def analyse(kernel: Kernel) -> KernelInfo:
    info = KernelInfo(kernel)
    for p in kernel.params:
        info.types[p.name] = p.type
    # A kernel without a grid is one program: pid0 is 0 there, as on the NumPy reference (``grid or (1,)``) and in
    # the verifier's mask-vars rule, so parsed IR that names it runs the same on every backend.
    for g, n in enumerate(kernel.grid or (1,)):
        info.ranges[f"pid{g}"] = (0, n - 1)
    flat: list[Op] = []
    spans: list[tuple[Loop, int, int]] = []
    header_reads: list[tuple[int, str]] = []  # (position, root) of each runtime loop's register read

    def visit(body):
        for stmt in body:
            if isinstance(stmt, Loop):
                first = len(flat)
                if stmt.reads is not None:  # a runtime loop reads its register where it starts
                    header_reads.append((first, info.root(stmt.reads.tensor.name)))
                    info.refs[stmt.reads.tensor.name] = info.refs.get(stmt.reads.tensor.name, 0) + 1
                info.ranges[stmt.var] = (stmt.start, stmt.last) if stmt.trip_count else (stmt.start, stmt.start)
                visit(stmt.body)
                spans.append((stmt, first, len(flat)))
            else:
                if stmt.result is not None:
                    info.types[stmt.result.name] = stmt.result.type
                if stmt.name in VIEW_OPS:
                    src = stmt.operands["x"].tensor.name
                    info.roots[stmt.result.name] = info.root(src)
                for v in stmt.operands.values():
                    if isinstance(v, Access):
                        info.types.setdefault(v.tensor.name, v.tensor.type)
                for name in {v.tensor.name for v in stmt.operands.values() if isinstance(v, Access)}:
                    info.refs[name] = info.refs.get(name, 0) + 1
                flat.append(stmt)

    visit(kernel.body)
    for t in kernel.outputs:
        info.refs[t.name] = info.refs.get(t.name, 0) + 1
    writes = [written_by(op, info) for op in flat]
    reads = [_reads(op, info) for op in flat]
    end = info.outputs | {p.name for p in kernel.params}
    for pos, root in header_reads:
        (reads[pos] if pos < len(reads) else end).add(root)
    suffix = [set() for _ in range(len(flat) + 1)]
    suffix[len(flat)] = set(end)
    for k in range(len(flat) - 1, -1, -1):
        suffix[k] = suffix[k + 1] | reads[k]
    for loop, first, last in spans:
        info.written[loop] = set().union(*writes[first:last]) if last > first else set()
        info.read_after[loop] = suffix[last]
    info.all_written = set().union(*writes) if writes else set()
    info.written_params = [p.name for p in kernel.params if p.name in info.all_written]
    return info


def is_shared_alloc(op: Op) -> bool:
    return op.name == "alloc" and op.result is not None and op.result.type.buffer == Buffer.SHARED_HBM
