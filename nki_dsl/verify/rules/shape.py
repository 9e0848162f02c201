"""Rule ``shape``: every result has the shape its op table entry computes from the operands (the tracer's result
types are re-derived, so parsed IR cannot declare a different one), a stored or assigned value fits its
destination after broadcasting its size-1 dimensions, and a reshape keeps the element count. Partition
conflicts and non-2-D transposes are left to the rules that name them."""

from __future__ import annotations

import math

from nki_dsl.errors import Diagnostic
from nki_dsl.ir import hbm_views
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.ir.ops import DECLARED, OPS, Family
from nki_dsl.ir.ops.shapes import ShapeError
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import partition_conflict, tiles, transpose_rank_error, write_pair
from nki_dsl.verify.program import program

RULE = "shape"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op, spec = site.op, OPS[site.op.name]
        if partition_conflict(op, spec) or transpose_rank_error(op, spec):
            continue
        msg = (_result_problem(op, spec) or _write_problem(op, spec) or _reshape_problem(op, spec)
               or _repeated_write_problem(op, spec))  # fmt: skip
        if msg:
            found.append(d.diagnostic(op, RULE, msg))
    return found


def _result_problem(op, spec) -> str | None:
    if spec.shape is None or spec.result is DECLARED:
        return None
    shapes = {n: tuple(a.shape) for n, a in tiles(op)}
    if op.result is None:  # an instruction writing an operand in place: its rule checks the operand shapes
        try:
            spec.shape(shapes, op.attrs)
        except ShapeError as e:
            return str(e)
        return None
    try:
        expected = spec.shape(shapes, op.attrs)
    except ShapeError as e:
        return str(e)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        return f"cannot derive the result shape from the operands and attributes ({type(e).__name__}: {e})"
    if expected is None or tuple(expected) == tuple(op.result.type.shape):
        return None
    given = ", ".join(f"'{n}' {d.dims(s)}" for n, s in shapes.items())
    return (f"result {d.tensor(op.result)} does not have the shape {d.dims(expected)} that {op.name} gives "
            f"for its operands ({given})")  # fmt: skip


def _write_problem(op, spec) -> str | None:
    pair = write_pair(op, spec)
    if pair is None:
        return None
    (dn, dst), (sn, src) = pair
    extra = len(src.shape) - len(dst.shape)
    fits = all(s == 1 for s in src.shape[:max(extra, 0)]) and all(
        s in (1, t) for s, t in zip(src.shape[max(extra, 0):], dst.shape[max(-extra, 0):])
    )
    if fits:
        return None
    return (f"{d.operand(sn, src)} does not fit the destination {d.operand(dn, dst)}: the shapes must match, "
            f"except that size-1 dimensions of '{sn}' are broadcast")  # fmt: skip


def _repeated_write_problem(op, spec) -> str | None:
    """A written access must reach a distinct element for each position: every axis longer than 1 appears in
    its index (``dst[3, d1 ; 128x512]`` would write each element 128 times, in no defined order)."""
    for o in spec.writes:
        a = op.operands.get(o.name)
        if not isinstance(a, Access):
            continue
        used = a.vars()
        for k, n in enumerate(a.shape):
            if n > 1 and f"d{k}" not in used:
                return (f"{d.operand(o.name, a)} writes with an index that ignores axis d{k} of extent {n}: each "
                        f"element would be written {n} times")  # fmt: skip
    return None


def _reshape_problem(op, spec) -> str | None:
    if spec.family is not Family.RESHAPE or op.result is None or op.name == hbm_views.VIEW:
        return None  # a dtype view keeps its bytes, not its element count: rule hbm-view
    sources = tiles(op)
    if not sources:
        return None
    name, src = sources[0]
    n_src, n_out = math.prod(src.tensor.type.shape), math.prod(op.result.type.shape)
    attr = op.attrs.get("shape")
    if attr is not None and tuple(attr) != tuple(op.result.type.shape):  # backends reshape by the attribute
        return (f"attribute shape = {list(attr)} is not the shape of result {d.tensor(op.result)}; a reshape "
                f"declares its result's shape")  # fmt: skip
    if n_src == n_out:
        return None
    return (f"result {d.tensor(op.result)} has {n_out} elements but operand '{name}' {d.tensor(src.tensor)} "
            f"has {n_src}; a reshape keeps every element")  # fmt: skip
