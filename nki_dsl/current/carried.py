"""Which local variables a ``for`` loop carries from one iteration to the next, read off the loop's source.

A variable is *carried* when the body may read it before assigning it (``count += 1``, ``acc = acc + x``,
``prev = cur``) and also assigns it. Rebinding any other variable in the body (an inner loop's index, a
temporary tile name reused from an earlier loop) cannot change what later iterations compute, so the
specialiser (``specialize.py``) ignores those rebindings and keeps the loop symbolic.

The analysis is the textbook upward-exposed-use test on the ``ast`` of the body, in statement order: a name read
while not yet assigned in this pass is exposed. An assignment inside an ``if`` branch or an inner loop counts as
an assignment for the statements after it, a simplification that can only miss a carried variable when the
branch that assigns it is not taken; a name that is never read first is never carried.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap


@functools.lru_cache(maxsize=1024)
def for_statement(code, line: int, api: str) -> ast.For | None:
    """The ``for`` statement at source ``line`` of function ``code`` that iterates directly over a call of
    ``api`` (``for k in nl.affine_range(n):``), or None: no source, or the iterator is consumed some other way
    (``zip(nl.affine_range(n), tiles)``, ``list(...)``, a comprehension), where a symbolic loop yielding once
    would silently cut the iteration short. The caller then unrolls the loop."""
    try:
        lines, first = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    if first == 0:  # a module's code: getsourcelines numbers from 0
        first = 1
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and node.lineno + first - 1 == line and _calls(node.iter, api):
            return node
    return None


def _calls(node, api: str) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name == api


def carried_names(loop: ast.For) -> frozenset[str]:
    """The variables the loop carries from one iteration to the next."""
    return frozenset(_carried(loop))


def _carried(loop: ast.For) -> set[str]:
    assigned = set(_stored(loop.target))
    exposed: set[str] = set()
    for stmt in loop.body:
        _visit(stmt, assigned, exposed)
    return exposed & assigned


def _visit(node, assigned: set[str], exposed: set[str]) -> None:
    """Record reads of not-yet-assigned names as exposed, in evaluation order (the value before the target)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
        return  # a nested definition runs later, if at all
    if isinstance(node, ast.Assign | ast.AnnAssign):
        if node.value is not None:
            _visit(node.value, assigned, exposed)
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            _visit_target(target, assigned, exposed)
        return
    if isinstance(node, ast.AugAssign):
        _visit(node.value, assigned, exposed)
        for name in _stored(node.target):
            if name not in assigned:
                exposed.add(name)
        _visit_target(node.target, assigned, exposed)
        return
    if isinstance(node, ast.For):
        _visit(node.iter, assigned, exposed)
        _visit_target(node.target, assigned, exposed)
        for stmt in node.body + node.orelse:
            _visit(stmt, assigned, exposed)
        return
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in assigned:
            exposed.add(node.id)
        elif isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        return
    for child in ast.iter_child_nodes(node):
        _visit(child, assigned, exposed)


def _visit_target(target, assigned: set[str], exposed: set[str]) -> None:
    """An assignment target: subscripts and attributes read their base (``t[k] = x`` reads ``t`` and ``k``)."""
    if isinstance(target, ast.Name):
        assigned.add(target.id)
    elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
        for elt in target.elts if not isinstance(target, ast.Starred) else [target.value]:
            _visit_target(elt, assigned, exposed)
    else:
        _visit(target, assigned, exposed)


def _stored(target) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
