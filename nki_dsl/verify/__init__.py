"""The verifier: hardware and language rules checked on IR (traced or parsed), each reported with the kernel
source line, the op, the operand and the rule."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic, NkiVerificationError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.verify.program import shared
from nki_dsl.verify.rules import RULES, WELL_FORMED


def verify_kernel(kernel: Kernel, target: str = "trn2") -> list[Diagnostic]:
    """Every diagnostic, in source-line order. Rules past the well-formedness checks run only on well-formed IR."""
    found: list[Diagnostic] = []
    with shared(kernel):
        for rule in WELL_FORMED:
            found = rule(kernel, target)
            if found:
                return _ordered(found)
        for rule in RULES:
            if rule not in WELL_FORMED:
                found.extend(rule(kernel, target))
    return _ordered(found)


def _ordered(found: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(found, key=lambda d: (d.loc.line, d.rule))


def check(kernel: Kernel, target: str = "trn2") -> Kernel:
    """Raise ``NkiVerificationError`` listing every broken rule; return the kernel when it is valid."""
    found = verify_kernel(kernel, target)
    if found:
        raise NkiVerificationError(found)
    return kernel
