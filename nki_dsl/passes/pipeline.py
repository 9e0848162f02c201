"""The pass pipeline as a flat list of named steps.

What a pass's output is checked for. A kernel is verified in full where it enters (traced, parsed, instantiated:
``passes/verifier.py``); that check guards untrusted input and stays whatever happens here. A pass is trusted code
run on IR that check accepted, so verifying its output again is translation validation: a test of the pass, not
of the user's kernel. Like LLVM's ``-verify-each`` and MLIR's pass-manager verifier in debug builds, it is a safety
net for the people changing passes, and costs as much as the first verification (ViT attention at sequence 2048:
~0.26 s of the ~0.5 s of a first call's verify + compile). So it is off by default (``CHECK_EACH_PASS``) and on in
the test suite (``tests/conftest.py``), where every kernel any test compiles has each pass's output verified in
full and a pass that leaves invalid IR is reported by name, with every rule it broke (``NkiPassError``).

Nothing the default skips goes unjudged: the placing rules (``sbuf-capacity``, ``psum-banks``) already judged the
lowered kernel during the first verification, and the allocator refuses what does not fit with its own
diagnostic; a rule that cannot rewrite an op is a diagnostic too (``rewrite.NkiRewriteError``)."""

from __future__ import annotations

import time

from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.nodes import Kernel
from nki_dsl.passes.allocate import allocate
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.rewrite import Pass
from nki_dsl.passes.verifier import AllocatorView, check_output, take_kept
from nki_dsl.targets import Target

PIPELINE: list[Pass] = [LOWER_LANGUAGE]

#: Verify each pass's output in full (translation validation, see the module docstring); ``run_pipeline``'s
#: ``check_each_pass`` overrides it per call. The test suite turns it on.
CHECK_EACH_PASS = False


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
    ``times``, when given, receives the seconds of each step (``run_pipeline``'s, then ``"allocate"``). The
    allocator starts from the live ranges and one-copy fits the verifier's placing rules computed when the
    kernel it allocates is the lowering they judged (``AllocatorView.fit``)."""
    lowered, view = _run(kernel, target, PIPELINE, times, None)
    start = time.perf_counter()
    allocation = allocate(lowered, target, fit=None if view is None else view.fit)
    if times is not None:
        times["allocate"] = time.perf_counter() - start
    return lowered, allocation


def run_pipeline(kernel: Kernel, target: Target, passes: list[Pass] | None = None,
                 times: dict[str, float] | None = None, check_each_pass: bool | None = None) -> Kernel:  # fmt: skip
    """``kernel`` after every pass of ``passes`` (default ``PIPELINE``). A pass whose result verifying ``kernel``
    made (``lower-language``: ``passes/verifier.py``) is not run again. Each result is verified for ``target``
    when ``check_each_pass`` (default ``CHECK_EACH_PASS``) is on. ``times``, when given, receives the seconds of
    ``"pass <name>"`` and, when checked, ``"verify after <name>"``."""
    return _run(kernel, target, PIPELINE if passes is None else passes, times, check_each_pass)[0]


def _run(kernel: Kernel, target: Target, passes: list[Pass], times: dict[str, float] | None,
         check_each_pass: bool | None) -> tuple[Kernel, AllocatorView | None]:  # fmt: skip
    """``run_pipeline``, with the AllocatorView of the result when one was made of that very kernel object."""
    checked = CHECK_EACH_PASS if check_each_pass is None else check_each_pass
    view = None
    for p in passes:
        start = time.perf_counter()
        kept = take_kept(kernel, p, target)
        kernel, view = (p(kernel, target), None) if kept is None else kept
        lowered = time.perf_counter()
        if times is not None:
            times[f"pass {p.name}"] = lowered - start
        if checked:
            try:
                view = check_output(kernel, target, view)
            except NkiVerificationError as e:
                raise NkiPassError(p.name, e) from None
            if times is not None:
                times[f"verify after {p.name}"] = time.perf_counter() - lowered
    return kernel, view
