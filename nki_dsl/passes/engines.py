"""Which engine runs each op of lowered IR: the contract between the ``lower-language`` pass and the simulator.

* ``nisa`` instructions run on the engine their op-table entry names, or the one their ``engine`` attribute
  picked (``tensor_copy``, ``tensor_scalar``, ``memset``, ``nc_transpose`` ...); DMA instructions on ``"dma"``.
* ``alloc`` and the HBM views ``hbm.reshape`` / ``hbm.view`` are not instructions (no engine).
* ``assign`` is not an instruction either: in lowered IR it always follows the instruction producing its source
  and names that instruction's destination region (``accumulate=add``: the instruction accumulates into it, as
  the Tensor engine does into a PSUM bank). ``fused_writes`` pairs them up.
* ``EXEMPT``: the ``nl`` ops the pass keeps, with the engine the simulator should charge and why.
"""

from __future__ import annotations

from nki_dsl.ir.nodes import Kernel, Loop, Op
from nki_dsl.ir.ops import OPS

# nl ops with no rule in lower-language, the engine that runs them, and why they stay.
EXEMPT: dict[str, tuple[str | None, str]] = {
    "nl.random_seed": (None, "sets the random-number state; no data instruction"),
    "nl.device_print": (None, "debugging output the backends print when they run it; not timed (NKI's simulator "
                              "does not time it either)"),
    "nl.shared_constant": (None, "compile-time data placed in HBM before the kernel runs; no instruction"),
}

NOT_INSTRUCTIONS = ("alloc", "hbm.reshape", "hbm.view", "assign")


def engine_of(op: Op) -> str | None:
    """The engine ``op`` runs on in lowered IR, or None when it is not an instruction."""
    spec = OPS[op.name]
    if spec.engine is not None:
        return str(op.attrs.get("engine", spec.engine))
    if op.name in EXEMPT:
        return EXEMPT[op.name][0]
    return None


def fused_writes(kernel: Kernel) -> dict[Op, Op]:
    """``{instruction: assign}`` for every assign of lowered IR, keyed by the instruction that writes its
    destination (the statement just before it in the same body)."""
    found: dict[Op, Op] = {}

    def walk(body):
        prev = None
        for stmt in body:
            if isinstance(stmt, Loop):
                walk(stmt.body)
            elif stmt.name == "assign" and isinstance(prev, Op) and prev.result is stmt.operands["src"].tensor:
                found[prev] = stmt
            prev = stmt

    walk(kernel.body)
    return found
