"""``nki.phase_times``: where the time of turning one kernel call into an engine program goes, phase by phase.

The phases are the ones every first call runs (``nki.trace``, then a backend's compile): tracing, each verifier
rule, each pass of the pipeline with the verification after it, and SBUF/PSUM allocation. The kernel is traced
afresh, outside its jit cache, so the figures are a first call's. ``benchmarks/trace_verify_speed.py`` prints them.
"""

from __future__ import annotations

import gc
import time

from nki_dsl.errors import NkiVerificationError
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import as_launch, bind


def phase_times(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs) -> dict[str, float]:
    """Seconds per phase of ``kernel(*args, **kwargs)`` on ``target``, in the order they run: ``"trace"``,
    ``"verify program facts"`` (the walk the rules share), ``"verify <rule>"`` for each verifier rule, then for
    each pass ``"pass <name>"`` and ``"verify after <name>"`` (all its rules together), and ``"allocate"``.
    ``kernel`` may carry a launch grid (``kernel[2, 4]``) and ``args`` may be arrays or ``nki.spec`` shapes.
    Raises ``NkiVerificationError`` (every broken rule) when the kernel is not valid, as its call would."""
    # deferred: `import nki_dsl` loads neither the verifier nor the passes; only a timed compile needs them
    from nki_dsl.passes.allocate import allocate
    from nki_dsl.passes.pipeline import PIPELINE
    from nki_dsl.verify import check, verify_kernel
    from nki_dsl.verify.program import shared
    from nki_dsl.verify.rules import RULE_IDS, RULES

    resolved = get_target(target)
    launch = as_launch(kernel)
    times: dict[str, float] = {}
    start = time.perf_counter()
    bound, _ = bind(launch.jit.fn, args, kwargs)
    ir = launch.jit._trace(bound, launch.grid, resolved)[0]
    times["trace"] = time.perf_counter() - start
    enabled = gc.isenabled()
    gc.disable()  # as verify_kernel runs the rules: without the cyclic collector, which would only rescan
    try:
        start = time.perf_counter()
        found = []
        with shared(ir):  # the rules' shared facts (one walk of the program) are built once, as verify_kernel does
            times["verify program facts"] = time.perf_counter() - start
            for rule_id, rule in zip(RULE_IDS, RULES, strict=True):
                start = time.perf_counter()
                found.extend(rule(ir, resolved))
                times[f"verify {rule_id}"] = time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
    if found:  # the well-formedness rules' findings make the later ones meaningless: report as check() does
        raise NkiVerificationError(verify_kernel(ir, resolved))
    for p in PIPELINE:
        start = time.perf_counter()
        ir = p(ir, resolved)
        times[f"pass {p.name}"] = time.perf_counter() - start
        start = time.perf_counter()
        check(ir, resolved)
        times[f"verify after {p.name}"] = time.perf_counter() - start
    start = time.perf_counter()
    allocate(ir, resolved)
    times["allocate"] = time.perf_counter() - start
    return times
