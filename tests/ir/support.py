"""Structural comparison of kernels, for round-trip tests (reusable by other test packages).

``structure(kernel)`` turns a kernel into plain nested tuples and dicts, so ``assert structure(a) == structure(b)``
shows pytest's diff on failure. Tensors compare by name, type and kind; operands and attributes by name (their
order is the op table's, not the IR's); scalars by type and ``repr``, so ``1``, ``1.0`` and ``True`` differ and
``nan`` equals ``nan``.
"""

from __future__ import annotations

from contextlib import contextmanager

from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Tensor
from nki_dsl.ir.ops import OPS, AttrKind, AttrSpec, Family, OperandSpec, OpSpec

# A test-only op with one attribute of every kind, each named after its kind (so `mask` and `affine` are also
# attribute names, which the grammar must still accept), a scalar-only operand and an optional one.
EVERY_KIND = OpSpec(
    "test.every_kind",
    Family.INSTRUCTION,  # handled by name: no backend lowers it
    (OperandSpec("x"), OperandSpec("s", tile=False, scalar=True), OperandSpec("opt", optional=True)),
    tuple(AttrSpec(str(kind), kind) for kind in AttrKind),
)


def structure(kernel: Kernel) -> tuple:
    return (
        kernel.name,
        tuple(_tensor(p) for p in kernel.params),
        _body(kernel.body),
        tuple(_tensor(t) for t in kernel.outputs),
        _value(kernel.grid),
        kernel.source_file,
        tuple((k, _value(v)) for k, v in kernel.constants.items()),
    )


def kernels_equal(a: Kernel, b: Kernel) -> bool:
    return structure(a) == structure(b)


def unlinked_tensors(kernel: Kernel) -> list[str]:
    """Names of tensors used (by an access or as an output) through an object other than the one defined as a
    param or op result: a parser must share one Tensor object per name."""
    defined = {id(p) for p in kernel.params}
    bad = []
    for stmt, _ in kernel.walk():
        if isinstance(stmt, Loop) and stmt.reads is not None and id(stmt.reads.tensor) not in defined:
            bad.append(stmt.reads.tensor.name)
        if isinstance(stmt, Op):
            accesses = [o for o in stmt.operands.values() if isinstance(o, Access)]
            bad += [a.tensor.name for a in accesses if id(a.tensor) not in defined]
            if stmt.result is not None:
                defined.add(id(stmt.result))
    return bad + [t.name for t in kernel.outputs if id(t) not in defined]


@contextmanager
def extra_ops(*specs: OpSpec):
    """Add test-only entries to the op table for the duration of a block."""
    for spec in specs:
        OPS[spec.name] = spec
    try:
        yield
    finally:
        for spec in specs:
            del OPS[spec.name]


def _tensor(t: Tensor) -> tuple:
    return (t.name, t.type, t.kind)


def _body(body: list) -> tuple:
    return tuple(_loop(s) if isinstance(s, Loop) else _op(s) for s in body)


def _loop(loop: Loop) -> tuple:
    reads = None if loop.reads is None else _operand(loop.reads)  # a runtime loop's register
    return ("loop", loop.kind, loop.var, loop.start, loop.stop, loop.step, loop.loc, reads, _body(loop.body))


def _op(op: Op) -> tuple:
    operands = {n: _operand(o) for n, o in op.operands.items()}
    attrs = {n: _value(v) for n, v in op.attrs.items()}
    result = None if op.result is None else _tensor(op.result)
    return ("op", op.name, operands, attrs, result, op.loc, op.mask)


def _operand(o) -> tuple:
    if isinstance(o, Imm):
        return ("imm", _value(o.value))
    return ("access", _tensor(o.tensor), o.index, o.shape)


def _value(v) -> object:
    if isinstance(v, tuple):
        return tuple(_value(x) for x in v)
    if isinstance(v, bool | int | float):
        return (type(v).__name__, repr(v))
    return v
