"""The verifier: hardware and language rules checked on IR (traced or parsed), each reported with the kernel
source line, the op, the operand and the rule. Untrusted IR is also checked against an ``IRBudget``
(``budgets.py``) before any rule that could be expensive on hostile input.

The rules that judge on-chip placement (``sbuf-capacity``, ``psum-banks``) read the kernel as the allocator will
see it, after the ``lower-language`` pass, through the ``lowering`` the caller passes (``allocator_view.py``).
Callers use ``nki_dsl.passes.verifier`` (``verify_kernel``, ``check``), which passes the pipeline's own lowering
and keeps it for the compiler: a kernel is lowered once, by its verification, and compiled from that lowering."""

from __future__ import annotations

import gc
import time

from nki_dsl.errors import Diagnostic, NkiVerificationError
from nki_dsl.ir.budget import IRBudget
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import budgets
from nki_dsl.verify.allocator_view import Lowering
from nki_dsl.verify.program import shared
from nki_dsl.verify.rules import PLACING, RULE_IDS, RULES, WELL_FORMED

RULE_OF = dict(zip(RULES + PLACING, RULE_IDS, strict=True))  # rule function -> its id
LOWERING_STEP = "lower-language"  # the name ``times`` gives the lowering the placing rules read


def verify_kernel(kernel: Kernel, target: Target, budget: IRBudget | None = None,
                  times: dict[str, float] | None = None, *, lowering: Lowering) -> list[Diagnostic]:  # fmt: skip
    """Every diagnostic, in source-line order. Rules past the well-formedness checks (and, with a ``budget``, the
    budget checks) run only on IR that passed them; the placing rules read ``lowering(kernel, target)``.
    ``times``, when given, receives the seconds each step took: ``"program facts"`` (the walk the rules share),
    ``"budgets"``, each rule's id and ``"lower-language"`` (``nki.phase_times``)."""
    # The rules allocate many small records that live until they return and form no cycles: the cyclic collector
    # would only rescan them (a third of the time on a large parsed kernel).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _verify(kernel, target, budget, times, lowering)
    finally:
        if enabled:
            gc.enable()


def _verify(kernel: Kernel, target: Target, budget: IRBudget | None, times: dict | None,
            lowering: Lowering) -> list[Diagnostic]:  # fmt: skip
    found: list[Diagnostic] = []
    start = time.perf_counter()
    with shared(kernel):
        if times is not None:
            times["program facts"] = time.perf_counter() - start
        for rule in WELL_FORMED:
            found = _timed(times, RULE_OF[rule], rule, kernel, target)
            if found:
                return _ordered(found)
        if budget is not None:
            found = _timed(times, "budgets", budgets.check, kernel, target, budget)
            if found:
                return _ordered(found)
        for rule in RULES:
            if rule not in WELL_FORMED:
                found.extend(_timed(times, RULE_OF[rule], rule, kernel, target))
        view = _timed(times, LOWERING_STEP, lowering, kernel, target)
        if not found:  # an op the lowering cannot lower, in a kernel no other rule refuses
            found.extend(view.refusals)
        for rule in PLACING:
            found.extend(_timed(times, RULE_OF[rule], rule, kernel, target, view))
    return _ordered(found)


def _timed(times: dict | None, name: str, fn, *args):
    if times is None:
        return fn(*args)
    start = time.perf_counter()
    try:
        return fn(*args)
    finally:
        times[name] = time.perf_counter() - start


def _ordered(found: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(found, key=lambda d: (d.loc.line, d.rule))


def check(kernel: Kernel, target: Target, budget: IRBudget | None = None, *, lowering: Lowering) -> Kernel:
    """Raise ``NkiVerificationError`` listing every broken rule; return the kernel when it is valid."""
    found = verify_kernel(kernel, target, budget, lowering=lowering)
    if found:
        raise NkiVerificationError(found)
    return kernel
