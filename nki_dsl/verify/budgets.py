"""Budgets on what a kernel asks of the machine that runs it (``ir/budget.py`` holds the limits).

Run by ``verify_kernel`` when a caller passes a budget (``nki.parse_ir`` always does: parsed IR is untrusted),
after the well-formedness rules and before any other rule, so hostile IR is refused before anything expensive
looks at it. Traced kernels carry no budget: the user's own Python already decided what they cost.

* ``max_ops`` / ``max_loop_depth`` / ``max_grid_rank``: the generated NumPy and simulator code nests one Python
  block per grid axis, per loop and per mask level (three at most). CPython refuses more than 20 statically nested
  blocks with a raw SyntaxError; 4 + 8 + 3 = 15 stays clear of it.
* ``max_iterations``: op executions, the sum over ops of grid size x the trip counts of the loops around it; the
  NumPy reference spends 10-50 microseconds per execution, so 2**22 (4.2 million) is a few minutes at worst.
* ``max_tensor_bytes`` / ``max_hbm_bytes``: every tensor (and every access view at 4 bytes an element, the fp32
  the engines compute in) fits in one buffer of the budget, and on-chip tensors in the target's SBUF or PSUM;
  all HBM tensors together fit the budget and the target's HBM (reference/nki.md §1.1 table).

``measure(kernel)`` reports the same quantities, for tests that check the defaults against real kernels.
"""

from __future__ import annotations

import math

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic, SourceLoc
from nki_dsl.ir.affine import Mask
from nki_dsl.ir.budget import IRBudget, budget_diagnostic
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import Target

COMPUTE_BYTES = 4  # engines compute in fp32 (reference/nki.md §2.3): the NumPy reference holds tiles as fp32


def measure(kernel: Kernel) -> dict[str, int]:
    """The budgeted quantities of ``kernel``: ops, loop depth, grid rank, iterations, largest tensor and view bytes,
    total HBM bytes, longest expression."""
    grid = math.prod(kernel.grid) if kernel.grid else 1
    m = {"ops": 0, "loop_depth": 0, "grid_rank": len(kernel.grid), "iterations": 0, "tensor_bytes": 0,
         "hbm_bytes": sum(_nbytes(p) for p in kernel.params), "expression_terms": 0}  # fmt: skip
    for p in kernel.params:
        m["tensor_bytes"] = max(m["tensor_bytes"], _nbytes(p))
    for stmt, loops in kernel.walk():
        m["ops"] += 1
        if isinstance(stmt, Loop):
            m["loop_depth"] = max(m["loop_depth"], len(loops) + 1)
            continue
        m["iterations"] += grid * math.prod(lp.iterations for lp in loops)
        if stmt.result is not None:
            size = _nbytes(stmt.result)
            m["tensor_bytes"] = max(m["tensor_bytes"], size)
            if not stmt.result.type.buffer.on_chip and stmt.name not in VIEW_OPS:  # a view holds no bytes
                m["hbm_bytes"] += size
        for v in stmt.operands.values():
            if isinstance(v, Access):
                m["tensor_bytes"] = max(m["tensor_bytes"], math.prod(v.shape) * COMPUTE_BYTES)
                m["expression_terms"] = max(m["expression_terms"], *(len(e.terms) + 1 for e in v.index), 0)
        for mask in (stmt.mask, *(v for v in stmt.attrs.values() if isinstance(v, Mask))):
            if mask is not None:  # the op's mask and mask attributes (reduce_mask, affine_select's pred)
                m["expression_terms"] = max(m["expression_terms"], len(mask.constraints))
    return m


def check(kernel: Kernel, t: Target, budget: IRBudget) -> list[Diagnostic]:
    loc = SourceLoc(kernel.source_file, 0)
    found: list[Diagnostic] = []

    def over(field: str, value: int, limit: int, what: str, where: SourceLoc = loc, op: str = "kernel") -> bool:
        if value > limit:
            found.append(budget_diagnostic(field, value, limit, what, where, op))
            return True
        return False

    over("max_grid_rank", len(kernel.grid), budget.max_grid_rank, "the launch grid's rank")
    grid = math.prod(kernel.grid) if kernel.grid else 1
    on_chip = {Buffer.SBUF: t.partitions * t.sbuf_bytes_per_partition,  # §1.1 SBUF / core
               Buffer.PSUM: t.partitions * t.psum_bytes_per_partition}  # fmt: skip  # §1.1 PSUM / core
    hbm_limit = min(budget.max_hbm_bytes, t.hbm_bytes_per_chip)
    hbm = 0
    for p in kernel.params:
        size = _nbytes(p)
        hbm += size
        over("max_tensor_bytes", size, budget.max_tensor_bytes, f"parameter %{p.name}'s size in bytes")
    ops = iterations = 0
    reported: set[str] = set()  # one diagnostic per work budget: the first op that crosses it
    for stmt, loops in kernel.walk():
        ops += 1
        if isinstance(stmt, Loop):
            if len(loops) + 1 > budget.max_loop_depth and "depth" not in reported:
                reported.add("depth")
                over("max_loop_depth", len(loops) + 1, budget.max_loop_depth, f"loop {stmt.var}'s nesting depth",
                     stmt.loc, "loop")  # fmt: skip
            continue
        iterations += grid * math.prod(lp.iterations for lp in loops)
        if iterations > budget.max_iterations and "iterations" not in reported:
            reported.add("iterations")
            what = "the op executions (grid x loop trip counts, summed over ops) up to this op"
            over("max_iterations", iterations, budget.max_iterations, what, stmt.loc, stmt.name)
        found.extend(_memory(stmt, budget, on_chip))
        if stmt.result is not None and not stmt.result.type.buffer.on_chip and stmt.name not in VIEW_OPS:
            hbm += _nbytes(stmt.result)
            if hbm > hbm_limit and "hbm" not in reported:
                reported.add("hbm")
                what = (f"the HBM all tensors up to %{stmt.result.name} take, in bytes "
                        f"({t.name} has {t.hbm_bytes_per_chip:,})")  # fmt: skip
                over("max_hbm_bytes", hbm, hbm_limit, what, stmt.loc, stmt.name)
    if ops > budget.max_ops:
        over("max_ops", ops, budget.max_ops, "the number of ops and loops")
    if hbm > hbm_limit and "hbm" not in reported:
        over("max_hbm_bytes", hbm, hbm_limit, f"the HBM the parameters take, in bytes ({t.name} has "
             f"{t.hbm_bytes_per_chip:,})")  # fmt: skip
    return found


def _memory(op: Op, budget: IRBudget, on_chip: dict) -> list[Diagnostic]:
    out = []
    if op.result is not None:
        size, buffer = _nbytes(op.result), op.result.type.buffer
        limit, field = budget.max_tensor_bytes, "max_tensor_bytes"
        if buffer in on_chip and on_chip[buffer] < limit:
            limit, field = on_chip[buffer], f"max_tensor_bytes (the target's {buffer.value} holds {on_chip[buffer]:,})"
        if size > limit:
            out.append(budget_diagnostic(field, size, limit, f"%{op.result.name}'s size in bytes", op.loc, op.name))
    for name, v in op.operands.items():
        if isinstance(v, Access):
            size = math.prod(v.shape) * COMPUTE_BYTES
            if size > budget.max_tensor_bytes:
                what = f"operand '{name}' view {list(v.shape)} in bytes (at {COMPUTE_BYTES} per element)"
                out.append(budget_diagnostic("max_tensor_bytes", size, budget.max_tensor_bytes, what, op.loc, op.name))
    return out


def _nbytes(tensor) -> int:
    return math.prod(tensor.type.shape) * dtypes.get(tensor.type.dtype).itemsize
