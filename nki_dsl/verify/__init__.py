"""The verifier: hardware and language rules checked on IR (traced or parsed), each reported with the kernel
source line, the op, the operand and the rule. Untrusted IR is also checked against an ``IRBudget``
(``budgets.py``) before any rule that could be expensive on hostile input."""

from __future__ import annotations

import gc

from nki_dsl.errors import Diagnostic, NkiVerificationError
from nki_dsl.ir.budget import IRBudget
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import budgets
from nki_dsl.verify.program import shared
from nki_dsl.verify.rules import RULES, WELL_FORMED


def verify_kernel(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> list[Diagnostic]:
    """Every diagnostic, in source-line order. Rules past the well-formedness checks (and, with a ``budget``, the
    budget checks) run only on IR that passed them."""
    # The rules allocate many small records that live until they return and form no cycles: the cyclic collector
    # would only rescan them (a third of the time on a large parsed kernel).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _verify(kernel, target, budget)
    finally:
        if enabled:
            gc.enable()


def _verify(kernel: Kernel, target: Target, budget: IRBudget | None) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    with shared(kernel):
        for rule in WELL_FORMED:
            found = rule(kernel, target)
            if found:
                return _ordered(found)
        if budget is not None:
            found = budgets.check(kernel, target, budget)
            if found:
                return _ordered(found)
        for rule in RULES:
            if rule not in WELL_FORMED:
                found.extend(rule(kernel, target))
    return _ordered(found)


def _ordered(found: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(found, key=lambda d: (d.loc.line, d.rule))


def check(kernel: Kernel, target: Target, budget: IRBudget | None = None) -> Kernel:
    """Raise ``NkiVerificationError`` listing every broken rule; return the kernel when it is valid."""
    found = verify_kernel(kernel, target, budget)
    if found:
        raise NkiVerificationError(found)
    return kernel
