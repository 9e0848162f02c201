"""Rule ``out-of-bounds``: every index of every access stays inside its tensor for all values of the loop
indices, program ids and tile axes, as far as the op's mask allows (reference/nki.md §1.3 masks, §5.1
``err_tensor_access_out_of_bound``).

Ranges are static: a loop index spans ``[start, last]``, ``pid<N>`` spans the launch grid, an axis ``d<k>`` the
access extent. A mask narrows them: a constraint on one variable narrows that variable, and a constraint on a
multiple of the index expression itself (the ragged-edge idiom ``mask=(i_p < n)`` with ``i_p`` the index) bounds
the index directly. The mask ranges over the op's iteration space; its axes apply to an access whose extents
line up with it, right-aligned; a reduction's input is read under the op's ``reduce_mask`` (over its own axes).
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil, floor

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import Affine, format_affine, var_kind
from nki_dsl.ir.indirect import widened
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op
from nki_dsl.ir.ops import OPS, REDUCE_MASK, reduce_mask_operand
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.integer_sets import at_least, maximum
from nki_dsl.verify.operands import iteration_shape
from nki_dsl.verify.program import Site, program

RULE = "out-of-bounds"

Ranges = dict[str, tuple[int, int]]


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    grid = kernel.grid or (1,)
    pids = {f"pid{n}": (0, g - 1) for n, g in enumerate(grid)}
    for site in program(kernel).sites:
        base = _scalar_ranges(site, pids)
        if base is None:
            continue  # inside a loop that never runs
        for name, value in site.op.operands.items():
            if isinstance(value, Access):  # an indirect DMA's rows are checked when it runs (ir/indirect.py)
                found += _check_access(site, name, widened(site.op, name, value), base)
    return found


def _scalar_ranges(site: Site, pids: Ranges) -> Ranges | None:
    ranges = dict(pids)
    for loop in site.loops:
        if loop.trip_count <= 0:
            return None
        ranges[loop.var] = (loop.start, loop.last)
    return ranges


def _check_access(site: Site, name: str, a: Access, base: Ranges) -> list[Diagnostic]:
    op = site.op
    if any(s <= 0 for s in a.shape):
        return []
    ranges = dict(base)
    ranges.update({f"d{k}": (0, s - 1) for k, s in enumerate(a.shape)})
    constraints = _mask_for(op, a)
    if not _narrow(ranges, constraints):
        return []  # the mask switches the op off entirely
    out = []
    for dim, (expr, size) in enumerate(zip(a.index, a.tensor.type.shape)):
        lo, hi = _bounds(expr, ranges, constraints)
        if lo > hi or (lo >= 0 and hi <= size - 1):
            continue
        exact = _exact_range(expr, site.loops, ranges, constraints)
        if exact is None:
            continue  # no element passes the mask
        lo, hi = exact
        if lo >= 0 and hi <= size - 1:
            continue
        where = f"exceeds dimension size of {size}" if hi > size - 1 else "goes below 0"
        fix = "fix the loop bounds or " if any(var_kind(v) == "loop" for v in expr.vars()) else ""
        msg = (f"out-of-bound access for tensor {d.typed(a.tensor)} on dimension {dim}: index range [{lo}, {hi}] "
               f"{where}; the index is {format_affine(expr)}{_scalar_vars(expr, site.loops, ranges)} "
               f"({d.operand(name, a)}); {fix}restrict the op to the valid elements with mask=")  # fmt: skip
        out.append(d.diagnostic(op, RULE, msg))
    return out


def _exact_range(expr: Affine, loops: tuple[Loop, ...], ranges: Ranges,
                 constraints: list[Affine]) -> tuple[int, int] | None:  # fmt: skip
    """``expr``'s least and greatest value over the points the mask lets through, loop indices taking only the
    values their steps reach; None when the mask lets no point through."""
    env: dict[str, Affine | int] = {}
    box = dict(ranges)
    for lp in loops:
        if lp.step != 1 and lp.var in box:
            k = f"{lp.var}.k"
            box[k] = (0, lp.trip_count - 1)
            env[lp.var] = Affine.var(k, lp.step) + lp.start
    e = expr.substitute(env)
    box = {v: r for v, r in box.items() if v not in env}
    # A constraint on a variable without a range here cannot be related to the index: leaving it out only widens.
    wanted = [at_least(c.substitute(env)) for c in constraints if c.substitute(env).vars() <= box.keys()]
    hi = maximum(e, wanted, box)
    if hi is None:
        return None
    return -maximum(-e, wanted, box), hi


def _scalar_vars(expr: Affine, loops: tuple[Loop, ...], ranges: Ranges) -> str:
    """`` with i0 in [0, 2] from the affine_range loop at line 9``: where the loop indices and program ids of an index
    come from, so an overrun through a loop names the loop. Tile axes ``d<k>`` span the access and go unnamed."""
    by_var = {lp.var: lp for lp in loops}
    parts = []
    for v in sorted(expr.vars()):
        if var_kind(v) == "axis":
            continue
        lo, hi = ranges[v]
        lp = by_var.get(v)
        source = f"the {d.LOOP_API.get(lp.kind, lp.kind)} loop at line {lp.loc.line}" if lp else "the launch grid"
        parts.append(f"{v} in [{lo}, {hi}] from {source}")
    return " with " + " and ".join(parts) if parts else ""


def _mask_for(op: Op, a: Access) -> list[Affine]:
    """The op's mask constraints in the access's own axis names; constraints on axes that do not line up with
    the access are dropped (they cannot be related to its indices). A reduction's input is read under its
    ``reduce_mask``, which ranges over that operand's axes."""
    spec = OPS[op.name]
    reduced = reduce_mask_operand(spec)
    if reduced is not None and op.attrs.get(REDUCE_MASK.name) is not None and op.operands.get(reduced) is a:
        return list(op.attrs[REDUCE_MASK.name].constraints)
    if op.mask is None:
        return []
    space = iteration_shape(op, spec) or ()
    constraints = op.mask.constraints
    perm = _operand_axes(op, spec)
    if perm is not None and len(perm) == len(space):
        # Masks live over the result's axes; the operand of a transpose (its only access) has result axis k as
        # its axis perm[k], so the mask is renamed into the operand's axes.
        space = tuple(space[perm.index(j)] for j in range(len(perm)))
        constraints = [c.rename({f"d{k}": f"d{p}" for k, p in enumerate(perm)}) for c in constraints]
    shift = len(space) - len(a.shape)
    rename, dropped = {}, set()
    for k, extent in enumerate(space):
        j = k - shift
        if 0 <= j < len(a.shape) and a.shape[j] == extent:
            rename[f"d{k}"] = f"d{j}"
        else:
            dropped.add(f"d{k}")
    out = []
    for c in constraints:
        if not c.vars() & dropped:
            out.append(c.rename(rename))
    return out


def _operand_axes(op: Op, spec) -> tuple[int, ...] | None:
    """For ops that permute their operand's axes (``nl.transpose``, ``nisa.nc_transpose``, ``nisa.dma_transpose``
    ...): ``perm`` with result axis k = operand axis perm[k] (``OpSpec.permutes``)."""
    return spec.permutes.of(op.attrs) if spec.permutes is not None else None


def _narrow(ranges: Ranges, constraints: list[Affine]) -> bool:
    """Apply one-variable constraints ``c*v + k >= 0`` to the ranges; False when a range becomes empty."""
    for c in constraints:
        if len(c.terms) != 1:
            continue
        (v, coef), k = c.terms[0], c.const
        if v not in ranges:
            continue
        lo, hi = ranges[v]
        if coef > 0:
            lo = max(lo, ceil(Fraction(-k, coef)))
        else:
            hi = min(hi, floor(Fraction(k, -coef)))
        if lo > hi:
            return False
        ranges[v] = (lo, hi)
    return True


def _bounds(expr: Affine, ranges: Ranges, constraints: list[Affine]) -> tuple[int, int]:
    lo, hi = expr.bounds(ranges)
    if not expr.terms:
        return lo, hi
    for c in constraints:
        ratio = _ratio(expr, c)
        if ratio is None:
            continue
        # expr = ratio * (c - c.const) + expr.const and c >= 0, so expr is bounded on one side.
        edge = -ratio * c.const + expr.const
        if ratio > 0:
            lo = max(lo, ceil(edge))
        else:
            hi = min(hi, floor(edge))
    return lo, hi


def _ratio(expr: Affine, c: Affine) -> Fraction | None:
    """``r`` with ``expr.terms == r * c.terms``, or None."""
    if len(expr.terms) != len(c.terms):
        return None
    ratio = None
    for (v, a), (w, b) in zip(expr.terms, c.terms):
        if v != w:
            return None
        r = Fraction(a, b)
        if ratio is None:
            ratio = r
        elif r != ratio:
            return None
    return ratio

