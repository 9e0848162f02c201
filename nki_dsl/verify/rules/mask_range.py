"""Rule ``mask-range``: every mask constraint is 32-bit integer arithmetic over its ranges. A mask is an affine
predicate ``c + sum(k * v) >= 0`` over loop indices, program ids and the op's axes; the engines evaluate such
affine index patterns in int32 (reference/nki.md §2.7 GpSimd: ``iota`` and ``affine_select``, the instruction a
mask on a tile becomes, compute their affine value in int32 math), and the JAX backend computes a traced
constraint the same way. A constraint whose constant or terms reach past int32 would wrap there while the NumPy
reference computes it exactly, so two backends would disagree on which elements an op writes.

The bound is the sum of the magnitudes, ``|c| + sum(|k| * max|v|)``, so every partial sum, in any order of
evaluation, fits too. Loop indices range over their loop, program ids over the launch grid, axes over the op's
iteration space (a ``reduce_mask`` over its reduced operand's), and shape symbols over the family's intervals:
the same check, on a family's IR, holds for every instance of it (``verify/family.py`` runs it on the family).
"""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import Affine, Mask, var_kind, var_number
from nki_dsl.ir.nodes import Access, Kernel, Loop
from nki_dsl.ir.ops import OPS, REDUCE_MASK, reduce_mask_operand
from nki_dsl.ir.symbols import ranges as symbol_ranges
from nki_dsl.ir.symbols import short_int
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import iteration_shape
from nki_dsl.verify.program import program

RULE = "mask-range"
INT32_MAX = 2**31 - 1


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    symbols = symbol_ranges(kernel.symbols) if kernel.symbols else {}
    grid = tuple(kernel.grid) or (1,)
    found = []
    for site in program(kernel).sites:
        op = site.op
        loops = {lp.var: _loop_range(lp, symbols) for lp in site.loops}
        masks = [("mask", op.mask, iteration_shape(op, OPS[op.name]) or ())]
        reduced = op.operands.get(reduce_mask_operand(OPS[op.name]) or "")
        if isinstance(reduced, Access):
            masks.append(("reduce_mask", op.attrs.get(REDUCE_MASK.name), reduced.shape))
        for what, mask, space in masks:
            if not isinstance(mask, Mask):
                continue
            over = [(c, r) for c in mask.constraints if (r := _magnitude(c, loops, grid, space, symbols)) > INT32_MAX]
            if over:
                (c, reach), more = over[0], len(over) - 1
                others = f" (and {more} more of its constraints)" if more else ""
                msg = (f"{what} constraint {c} >= 0 reaches magnitude {short_int(reach)} over its loops, axes and "
                       f"symbols{others}, past {INT32_MAX}: engines evaluate masks in int32 arithmetic")  # fmt: skip
                found.append(d.diagnostic(op, RULE, msg))
    return found


def _loop_range(lp: Loop, symbols: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """The values a loop's index may take: ``start .. stop - 1`` with a symbolic stop at the top of its interval
    (a start is always an integer: the text form's grammar and the tracer's loops take only a symbolic stop)."""
    start = lp.start
    stop = lp.stop if isinstance(lp.stop, int) else symbols.get(lp.stop, (0, 0))[1]
    return min(start, stop - 1), max(start, stop - 1)


def _magnitude(c: Affine, loops, grid, space, symbols) -> int:
    total = abs(c.const)
    for v, k in c.terms:
        kind = var_kind(v)
        if kind == "loop":
            lo, hi = loops[v]  # an enclosing loop's: mask-vars (a WELL_FORMED rule, run first) refuses any other
        elif kind == "pid":
            n = var_number(v)
            lo, hi = 0, (grid[n] - 1 if n < len(grid) and isinstance(grid[n], int) else 0)
        elif kind == "axis":
            n = var_number(v)
            extent = space[n] if n < len(space) else 1
            lo, hi = 0, (extent - 1 if isinstance(extent, int) else symbols.get(extent, (0, 0))[1] - 1)
        else:
            lo, hi = symbols.get(v, (0, 0))
        total += abs(k) * max(abs(lo), abs(hi))
    return total

