"""The pass pipeline as a flat list of named steps, verified after each one (DESIGN.md "Verify at every
boundary"): a pass that leaves invalid IR is reported by name, with every rule it broke."""

from __future__ import annotations

from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.passes.allocate import allocate
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.rewrite import Pass
from nki_dsl.targets import Target
from nki_dsl.verify import check

PIPELINE: list[Pass] = [LOWER_LANGUAGE]


class NkiPassError(NkiVerificationError):
    """A pass produced IR the verifier rejects; ``pass_name`` says which."""

    def __init__(self, pass_name: str, cause: NkiVerificationError):
        self.pass_name = pass_name
        super().__init__(cause.diagnostics)

    def __str__(self) -> str:
        return f"after pass '{self.pass_name}':\n" + super().__str__()


def compile_for_target(kernel: Kernel, target: Target):
    """``(lowered kernel, Allocation)``: the engine program of traced ``kernel`` on ``target`` (every pass, then
    SBUF/PSUM placement). The simulator and ``nki asm`` both start from this, so the listing is what runs."""
    lowered = run_pipeline(kernel, target)
    return lowered, allocate(lowered, target)


def run_pipeline(kernel: Kernel, target: Target, passes: list[Pass] | None = None) -> Kernel:
    """``kernel`` after every pass of ``passes`` (default ``PIPELINE``), each result verified for ``target``."""
    for p in PIPELINE if passes is None else passes:
        kernel = p(kernel, target)
        try:
            check(kernel, target)
        except NkiVerificationError as e:
            raise NkiPassError(p.name, e) from None
    return kernel
