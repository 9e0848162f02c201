"""Rule ``structure``: the IR is well formed, so the other rules (and every backend) may trust it.

Parsed IR is a security boundary: an op must be in the op table with the operands and attributes it lists, a
tensor must be defined once, before it is used; loops need a valid index variable and a positive step.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic, SourceLoc
from nki_dsl.ir import runtime_loops
from nki_dsl.ir.affine import Affine, Mask, var_kind
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op
from nki_dsl.ir.ops import OPS, REQUIRED, AttrKind
from nki_dsl.ir.symbols import short_int
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.targets import Target
from nki_dsl.verify.describe import LOOP_API, ref

RULE = "structure"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    defined = set()
    names: dict[str, object] = {}
    kernel_loc = SourceLoc(kernel.source_file, 0)

    def define(t, loc, op_name) -> None:
        problem = _type_problem(t.type)
        if problem:
            found.append(Diagnostic(loc, op_name, RULE, f"tensor {ref(t)} has a malformed type: {problem}"))
        if t in defined or names.get(t.name, t) is not t:
            found.append(Diagnostic(loc, op_name, RULE, f"tensor {ref(t)} is defined more than once"))
        defined.add(t)
        names[t.name] = t

    for p in kernel.params:
        define(p, kernel_loc, "kernel")

    def walk(body, loop_vars: tuple[str, ...]) -> None:
        for stmt in body:
            if isinstance(stmt, Loop):
                problem = _loop_problem(stmt, loop_vars)
                if problem is None and stmt.reads is not None:
                    problem = next(iter(_access_problems("reads", stmt.reads, defined)), None)
                    problem = problem or _register_scope_problem(stmt, loop_vars)
                    problem = problem and f"loop {stmt.var}: {problem}"
                if problem:
                    found.append(Diagnostic(stmt.loc, LOOP_API.get(stmt.kind, "loop"), RULE, problem))
                walk(stmt.body, loop_vars + (stmt.var,))
            elif isinstance(stmt, Op):
                for msg in _op_problems(stmt, defined):
                    found.append(Diagnostic(stmt.loc, stmt.name, RULE, msg))
                if stmt.result is not None:
                    define(stmt.result, stmt.loc, stmt.name)
            else:
                found.append(Diagnostic(kernel_loc, "kernel", RULE, f"{type(stmt).__name__} is not an op or a loop"))

    walk(kernel.body, ())
    for t in kernel.outputs:
        if t not in defined:
            found.append(Diagnostic(kernel_loc, "kernel", RULE, f"output {ref(t)} is not defined in the kernel"))
    return found


# Loop indices are 32-bit integers: a runtime loop's register is an int32 tile (reference/nki.md §2.7 "Access
# patterns"), and the JAX backend computes every index in int32 (64-bit integers are off by default in JAX). A
# bound past that range would run on NumPy and fail inside XLA's argument parsing with a raw OverflowError.
INDEX_LIMIT = 2**31


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _loop_problem(loop: Loop, enclosing: tuple[str, ...]) -> str | None:
    if loop.kind not in ("affine", "sequential", *runtime_loops.KINDS):
        return f"loop kind {loop.kind!r} is not 'affine', 'sequential', 'dynamic', 'while' or 'scalar_offset'"
    if not _is_var(loop.var, "loop"):
        return f"loop index {loop.var!r} is not a loop variable i<N>"
    if loop.var in enclosing:
        return f"loop index {loop.var} is already the index of an enclosing loop"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (loop.start, loop.stop, loop.step)):
        return f"loop {loop.var} bounds must be ints"
    if loop.step <= 0:
        return f"loop {loop.var} has step {loop.step}; the step must be positive"
    if not all(-INDEX_LIMIT <= v < INDEX_LIMIT for v in (loop.start, loop.stop, loop.step)):
        return (f"loop {loop.var} has range({loop.start}, {loop.stop}, {loop.step}); loop bounds must fit a signed "
                f"32-bit index (|bound| < 2**31)")
    problem = runtime_loops.shape_problem(loop)
    return f"loop {loop.var}: {problem}" if problem else None


def _register_scope_problem(loop: Loop, enclosing: tuple[str, ...]) -> str | None:
    """A runtime loop reads its register outside its own iterations: its index may name enclosing loops and
    program ids (and the access's own axes), not the loop's own index."""
    for v in loop.reads.vars():
        if _is_var(v, "loop") and v not in enclosing:
            return f"its register is read at an index over {v}, which is not an enclosing loop"
        if not (_is_var(v, "loop") or _is_var(v, "pid") or _is_var(v, "axis")):
            return f"its register is read at an index over {v!r}, which is not a loop or program id"
    return None


def _op_problems(op: Op, defined: set) -> list[str]:
    spec = OPS.get(op.name)
    if spec is None:
        return [f"'{op.name}' is not an op in the op table"]
    out = []
    listed = {o.name for o in spec.operands}
    for name in op.operands:
        if name not in listed:
            out.append(f"unknown operand '{name}'; {op.name} takes {', '.join(sorted(listed)) or 'none'}")
    for o in spec.operands:
        value = op.operands.get(o.name)
        if value is None:
            if not o.optional:
                out.append(f"operand '{o.name}' is missing")
            elif o.needed(op.attrs):
                attr = o.optional_while[0]
                out.append(f"operand '{o.name}' is missing, and {attr} = {op.attrs[attr]} needs it")
        elif isinstance(value, Imm):
            if not o.scalar:
                out.append(f"operand '{o.name}' must be a tile, not the number {value.value!r}")
            elif _int(value.value) and not -INDEX_LIMIT <= value.value < 2 * INDEX_LIMIT:
                out.append(f"operand '{o.name}' is the integer {short_int(value.value)}, which fits neither int32 nor "
                           f"uint32: a Python int operand is an int32 (reference/nki.md §2.2 type promotion, weak "
                           f"scalars; lowering writes an unsigned tile's all-ones as its uint32 value); write it as "
                           f"a float, or as a tile of the dtype it needs")  # fmt: skip
        elif isinstance(value, Access):
            if not o.tile:
                out.append(f"operand '{o.name}' must be a number, not a tile")
            out += _access_problems(o.name, value, defined)
        else:
            out.append(f"operand '{o.name}' is neither a tile access nor a number")
    attrs = {a.name for a in spec.attrs}
    for name in op.attrs:
        if name not in attrs:
            out.append(f"unknown attribute '{name}'")
    for a in spec.attrs:
        # Every stage after the verifier reads an op's attributes directly, so an op carries each one the table
        # lists (builders and the parser fill in defaults); only ``implicit`` attributes may be absent.
        if a.name not in op.attrs and (a.default is REQUIRED or not a.implicit):
            out.append(f"attribute '{a.name}' is missing")
        value = op.attrs.get(a.name)
        if a.choices is not None and value is not None and value not in a.choices:
            out.append(f"attribute '{a.name}' = {value!r} is not one of {', '.join(a.choices)}")
    if (spec.result is None) != (op.result is None):
        out.append("produces a result, but the op table says it has none" if op.result is not None
                   else "has no result, but the op table says it produces one")  # fmt: skip
    if op.mask is not None and not (
        isinstance(op.mask, Mask) and all(_is_affine(c) for c in op.mask.constraints)
    ):
        out.append("mask is not a conjunction of affine constraints")
    for a in spec.attrs:  # mask attributes (affine_select's pred, a reduction's reduce_mask) alike
        value = op.attrs.get(a.name)
        if a.kind is AttrKind.MASK and value is not None and not (
            isinstance(value, Mask) and all(_is_affine(c) for c in value.constraints)
        ):
            out.append(f"attribute '{a.name}' is not a conjunction of affine constraints")
    return out


def _access_problems(name: str, a: Access, defined: set) -> list[str]:
    out = []
    if a.tensor not in defined:
        out.append(f"operand '{name}' uses tensor {ref(a.tensor)} before it is defined")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in a.shape):
        out.append(f"operand '{name}' has a malformed shape {list(a.shape)}")
    if len(a.index) != len(a.tensor.type.shape):
        out.append(
            f"operand '{name}' indexes {ref(a.tensor)} with {len(a.index)} expressions, "
            f"but it has {len(a.tensor.type.shape)} dimensions"
        )
    if not all(_is_affine(e) for e in a.index):
        out.append(f"operand '{name}' has an index that is not an affine expression")
    return out


def _type_problem(t) -> str | None:
    if not isinstance(t, TensorType):
        return "not a tensor type"
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in t.shape):
        return f"shape {list(t.shape)} is not made of sizes"
    if t.dtype not in dtypes.BY_NAME:
        return f"unknown dtype {t.dtype!r}"
    if not isinstance(t.buffer, Buffer):
        return f"unknown buffer {t.buffer!r}"
    if not (0 <= t.par_axis < max(len(t.shape), 1)):
        return f"partition axis {t.par_axis} is out of range"
    if t.par_axis and not t.buffer.on_chip:
        return "only on-chip tensors have block dimensions"
    return None


def _is_affine(e) -> bool:
    return isinstance(e, Affine) and all(isinstance(c, int) for _, c in e.terms) and isinstance(e.const, int)


def _is_var(name: str, kind: str) -> bool:
    try:
        return var_kind(name) == kind
    except (ValueError, TypeError):
        return False
