"""The pass pipeline as a flat list of named steps, verified after each one (DESIGN.md "Verify at every
boundary"): a pass that leaves invalid IR is reported by name, with every rule it broke."""

from __future__ import annotations

import time

from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.passes.allocate import allocate
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.rewrite import Pass
from nki_dsl.passes.verifier import check, take_kept
from nki_dsl.targets import Target

PIPELINE: list[Pass] = [LOWER_LANGUAGE]


class NkiPassError(NkiVerificationError):
    """A pass produced IR the verifier rejects; ``pass_name`` says which."""

    def __init__(self, pass_name: str, cause: NkiVerificationError):
        self.pass_name = pass_name
        super().__init__(cause.diagnostics)

    def __str__(self) -> str:
        return f"after pass '{self.pass_name}':\n" + super().__str__()


def compile_for_target(kernel: Kernel, target: Target, times: dict[str, float] | None = None):
    """``(lowered kernel, Allocation)``: the engine program of traced ``kernel`` on ``target`` (every pass, then
    SBUF/PSUM placement). The simulator and ``nki asm`` both start from this, so the listing is what runs.
    ``times``, when given, receives the seconds of each step (``run_pipeline``'s, then ``"allocate"``)."""
    lowered = run_pipeline(kernel, target, times=times)
    start = time.perf_counter()
    allocation = allocate(lowered, target)
    if times is not None:
        times["allocate"] = time.perf_counter() - start
    return lowered, allocation


def run_pipeline(kernel: Kernel, target: Target, passes: list[Pass] | None = None,
                 times: dict[str, float] | None = None) -> Kernel:  # fmt: skip
    """``kernel`` after every pass of ``passes`` (default ``PIPELINE``), each result verified for ``target``. A
    pass whose result verifying ``kernel`` made (``lower-language``: ``passes/verifier.py``) is not run again.
    ``times``, when given, receives the seconds of ``"pass <name>"`` and ``"verify after <name>"``."""
    for p in PIPELINE if passes is None else passes:
        start = time.perf_counter()
        kept = take_kept(kernel, p, target)
        kernel = p(kernel, target) if kept is None else kept
        lowered = time.perf_counter()
        try:
            check(kernel, target)
        except NkiVerificationError as e:
            raise NkiPassError(p.name, e) from None
        if times is not None:
            times[f"pass {p.name}"] = lowered - start
            times[f"verify after {p.name}"] = time.perf_counter() - lowered
    return kernel
