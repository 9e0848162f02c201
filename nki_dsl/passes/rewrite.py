"""The rewrite engine: a pass is data, a name and a table ``{op name: rule}``; one engine applies it to every op of a
kernel, inside loops too, and returns a new kernel (the input, which the jit cache holds, is never mutated).

A rule ``rule(op, ctx) -> list[Stmt]`` returns the statements that replace ``op`` (``[op]`` keeps it). Ops without a
rule are kept as they are. ``RewriteContext`` gives rules fresh tensor names, op construction with attribute
defaults from the op table, and what they need to know about the program around the op.

A rule that cannot rewrite its op (a form it does not handle) raises; the engine
turns that into ``NkiRewriteError``, a diagnostic naming the op, its source line, the pass (as the rule id) and
the reason, so neither the verifier (which lowers a kernel to judge its placement, ``passes/verifier.py``) nor a
compile lets a bare ``KeyError`` or ``NotImplementedError`` reach the user.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from nki_dsl.errors import Diagnostic, NkiError, NkiVerificationError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Imm, Kernel, Loop, Op, Stmt, Tensor
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.targets import Target

Rule = Callable[[Op, "RewriteContext"], list[Stmt]]


class NkiRewriteError(NkiVerificationError):
    """A rule of pass ``pass_name`` could not rewrite an op; the one diagnostic says which and why."""

    def __init__(self, pass_name: str, op: Op, cause: Exception):
        self.pass_name = pass_name
        reason = str(cause) if isinstance(cause, NotImplementedError) else f"{type(cause).__name__}: {cause}"
        super().__init__([Diagnostic(op.loc, op.name, pass_name, f"pass '{pass_name}' cannot rewrite it: {reason}")])


@dataclass(frozen=True)
class Pass:
    """A named rewrite: ``name`` is kebab-case and appears in every error a pass causes."""

    name: str
    rules: dict[str, Rule]
    doc: str = ""

    def __call__(self, kernel: Kernel, target: Target) -> Kernel:
        return rewrite(kernel, self, target)


@dataclass
class RewriteContext:
    kernel: Kernel
    target: Target
    uses: Counter = field(default_factory=Counter)  # tensor name -> number of operand accesses reading/writing it
    emitted: list[Stmt] = field(default_factory=list)  # statements already emitted in the current body
    _names: set[str] = field(default_factory=set)

    # -- names and tensors ---------------------------------------------------------------------------------------
    def fresh_name(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "t"
        k = 0
        while f"{base}_{k}" in self._names:
            k += 1
        name = f"{base}_{k}"
        self._names.add(name)
        return name

    def tile(self, like: Op, shape, dtype: str, buffer: str = "sbuf", hint: str = "", par_axis: int = 0) -> Tensor:
        """A fresh tile named after the result of ``like`` (so listings show where a temporary came from);
        ``par_axis`` places the partition axis of a block tensor (``nl.par_dim``)."""
        base = hint or (like.result.name if like.result is not None else like.name.split(".")[-1])
        return Tensor(self.fresh_name(base), TensorType(tuple(shape), dtype, Buffer(buffer), par_axis), "tile")

    # -- ops -----------------------------------------------------------------------------------------------------
    def op(self, name: str, like: Op, operands: dict, attrs: dict | None = None, result: Tensor | None = None,
           mask="inherit") -> Op:  # fmt: skip
        """An op of the op table at ``like``'s source line; absent attributes take their table defaults and
        ``mask`` defaults to ``like``'s mask (masks carry over to the instructions an op lowers to)."""
        full, missing, unknown = OPS[name].complete_attrs(dict(attrs or {}))
        if missing:
            raise ValueError(f"{name}: missing attribute {missing[0]!r}")
        if unknown:
            raise ValueError(f"{name}: unknown attributes {unknown}")
        ops = {k: v for k, v in operands.items() if v is not None}
        return Op(name, ops, full, result, like.loc, like.mask if mask == "inherit" else mask)

    def last_emitted(self) -> Stmt | None:
        return self.emitted[-1] if self.emitted else None


def rewrite(kernel: Kernel, rules_pass: Pass, target: Target) -> Kernel:
    # Rules may retype tensors (a load's tile becomes an explicit allocation): work on a private copy.
    kernel = private_copy(kernel)
    ctx = RewriteContext(kernel, target, uses=_uses(kernel), _names=_names(kernel))
    body = _rewrite_body(kernel.body, rules_pass, ctx)
    return Kernel(kernel.name, kernel.params, body, kernel.outputs, kernel.grid, kernel.source_file,
                  dict(kernel.constants), lnc=kernel.lnc)  # fmt: skip


def private_copy(kernel: Kernel) -> Kernel:
    """``kernel`` with its own tensors, statement lists and operand / attribute dicts: everything a rule may change
    (``Tensor.kind``, an op's attributes, bodies). What is immutable is shared: tensor types, affine indices, masks,
    source locations, immediates and attribute values (numbers, strings, tuples, affine expressions, masks: the op
    table's attribute kinds). ``copy.deepcopy`` also copied every index expression, most of the pass's time on a
    large kernel."""
    tensors: dict[int, Tensor] = {}

    def tensor(t: Tensor) -> Tensor:
        new = tensors.get(id(t))
        if new is None:
            new = tensors[id(t)] = Tensor(t.name, t.type, t.kind)
        return new

    def operand(v):
        return Access(tensor(v.tensor), v.index, v.shape) if isinstance(v, Access) else v

    def body(stmts: list[Stmt]) -> list[Stmt]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Loop):
                out.append(Loop(s.kind, s.var, s.start, s.stop, s.step, body(s.body), s.loc,
                                operand(s.reads) if s.reads is not None else None))
            else:
                result = tensor(s.result) if s.result is not None else None
                out.append(Op(s.name, {k: operand(v) for k, v in s.operands.items()}, dict(s.attrs), result, s.loc,
                              s.mask))  # fmt: skip
        return out

    params = [tensor(t) for t in kernel.params]
    new_body = body(kernel.body)
    return Kernel(kernel.name, params, new_body, [tensor(t) for t in kernel.outputs], kernel.grid, kernel.source_file,
                  copy.deepcopy(kernel.constants), lnc=kernel.lnc)  # fmt: skip


def _rewrite_body(body: list[Stmt], rules_pass: Pass, ctx: RewriteContext) -> list[Stmt]:
    out: list[Stmt] = []
    outer, ctx.emitted = ctx.emitted, out
    for stmt in body:
        if isinstance(stmt, Loop):
            inner = _rewrite_body(stmt.body, rules_pass, ctx)
            ctx.emitted = out
            out.append(Loop(stmt.kind, stmt.var, stmt.start, stmt.stop, stmt.step, inner, stmt.loc, stmt.reads))
            continue
        rule = rules_pass.rules.get(stmt.name)
        if rule is None:
            out.append(stmt)
            continue
        try:
            out.extend(rule(stmt, ctx))
        except NkiError:
            raise  # already a diagnostic
        except Exception as e:  # a form the rule does not handle, or a bug in it: named at the op either way
            raise NkiRewriteError(rules_pass.name, stmt, e) from e
    ctx.emitted = outer
    return out


def _uses(kernel: Kernel) -> Counter:
    uses: Counter = Counter()
    for stmt, _ in kernel.walk():
        if isinstance(stmt, Op):
            for v in stmt.operands.values():
                if isinstance(v, Access):
                    uses[v.tensor.name] += 1
    uses.update(t.name for t in kernel.outputs)
    return uses


def _names(kernel: Kernel) -> set[str]:
    names = {p.name for p in kernel.params}
    for stmt, _ in kernel.walk():
        if isinstance(stmt, Op) and stmt.result is not None:
            names.add(stmt.result.name)
    return names


def full(t: Tensor) -> Access:
    return t.full_access()


def broadcast_access(x: Access, shape) -> Access:
    """``x`` read with stride 0 along its size-1 axes that ``shape`` stretches (index d_k := 0 there)."""
    env = {f"d{k}": Affine() for k, (s, t) in enumerate(zip(x.shape, shape)) if s == 1 and t != 1}
    return Access(x.tensor, tuple(e.substitute(env) for e in x.index), tuple(shape))


__all__ = ["NkiRewriteError", "Pass", "Rule", "RewriteContext", "rewrite", "full", "broadcast_access", "Imm"]
