"""Rule ``mask-vars``: index expressions and masks only use variables in scope (reference/nki.md §5.1
``err_unsupported_expression_in_mask``). An index may use the indices of enclosing loops, program ids of the
launch grid and the axes ``d<k>`` of its own access; a mask the axes of the op's iteration space instead, and a
reduction's ``reduce_mask`` the axes of the operand it reduces. An
accumulating ``assign``'s ``zero_first`` names the index of a loop enclosing it (backends generate code from it).
Traced IR always satisfies this; it protects everything downstream from malformed parsed IR."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import var_kind, var_number
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.ir.ops import OPS, REDUCE_MASK, reduce_mask_operand
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import iteration_shape
from nki_dsl.verify.program import program

RULE = "mask-vars"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    n_pids = max(len(kernel.grid), 1)
    found = []
    for site in program(kernel).sites:
        op = site.op
        loop_vars = {lp.var for lp in site.loops}
        for name, a in op.operands.items():
            if not isinstance(a, Access):
                continue
            for v in sorted(a.vars()):
                problem = _out_of_scope(v, loop_vars, n_pids, len(a.shape))
                if problem:
                    found.append(d.diagnostic(op, RULE, f"{d.operand(name, a)} indexes with {problem}"))
        if op.mask is not None:
            space = iteration_shape(op, OPS[op.name]) or ()
            for v in sorted(op.mask.vars()):
                problem = _out_of_scope(v, loop_vars, n_pids, len(space))
                if problem:
                    msg = f"mask uses {problem}; a mask ranges over the op's iteration space {d.dims(space)}"
                    found.append(d.diagnostic(op, RULE, msg))
        found += _reduce_mask_problems(op, loop_vars, n_pids)
        first = op.attrs.get("zero_first", "")
        if first and (first not in loop_vars or op.attrs.get("accumulate") != "add"):
            msg = (f"zero_first = {first!r} must name the index of a loop enclosing this accumulation "
                   f"(accumulate = add)")  # fmt: skip
            found.append(d.diagnostic(op, RULE, msg))
    return found


def _reduce_mask_problems(op, loop_vars: set[str], n_pids: int) -> list[Diagnostic]:
    """A reduction's ``reduce_mask`` ranges over its reduced operand's axes."""
    mask = op.attrs.get(REDUCE_MASK.name)
    name = reduce_mask_operand(OPS[op.name])
    a = op.operands.get(name) if name is not None else None
    if mask is None or not isinstance(a, Access):
        return []
    out = []
    if OPS[op.name].fn in ("mean", "var"):
        msg = (f"reduce_mask on {op.name} would change the element count it divides by; reduce with nl.sum under "
               f"the mask instead")  # fmt: skip
        out.append(d.diagnostic(op, RULE, msg))
    for v in sorted(mask.vars()):
        problem = _out_of_scope(v, loop_vars, n_pids, len(a.shape))
        if problem:
            msg = f"reduce_mask uses {problem}; it ranges over the axes of {d.operand(name, a)}"
            out.append(d.diagnostic(op, RULE, msg))
    return out


def _out_of_scope(v: str, loop_vars: set[str], n_pids: int, n_axes: int) -> str | None:
    try:
        kind, n = var_kind(v), var_number(v)
    except (ValueError, TypeError):
        return f"'{v}', which is not a variable (i<N>, pid<N> or d<N>)"
    if kind == "sym":  # a shape family's symbol: only instantiated (concrete) IR reaches the rules
        return f"the shape symbol {v}, which a concrete kernel cannot hold (instantiate the shape family)"
    if kind == "loop" and v not in loop_vars:
        scope = ", ".join(sorted(loop_vars)) or "none"
        return f"{v}, which is not the index of an enclosing loop (enclosing loops: {scope})"
    if kind == "pid" and n >= n_pids:
        return f"{v}, but the launch grid has {d.plural(n_pids, 'axis', 'axes')}"
    if kind == "axis" and n >= n_axes:
        if not n_axes:
            return f"{v}, but there are no axes"
        axes = ", ".join(f"d{k}" for k in range(n_axes))
        return f"{v}, but there {'is' if n_axes == 1 else 'are'} only {d.plural(n_axes, 'axis', 'axes')} ({axes})"
    return None
