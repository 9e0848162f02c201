"""``nki.phase_times``: where the time of turning one kernel call into an engine program goes, phase by phase.

The phases are the ones every first call runs (``nki.trace``, then a backend's compile): tracing, each verifier
rule, each pass of the pipeline (with the verification after it, when checked), and SBUF/PSUM allocation. They
are timed inside the very functions a call runs (``verify_kernel``, ``compile_for_target``, which take a ``times``
dict), so the figures are a call's. The kernel is traced afresh, outside its jit cache: a first call's figures.
``benchmarks/trace_verify_speed.py`` prints them.
"""

from __future__ import annotations

import time

from nki_dsl.errors import NkiVerificationError
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import as_launch, bind


def phase_times(kernel, *args, target: str | Target = DEFAULT_TARGET, **kwargs) -> dict[str, float]:
    """Seconds per phase of ``kernel(*args, **kwargs)`` on ``target``, in the order they run: ``"trace"``,
    ``"verify program facts"`` (the walk the rules share), ``"verify <rule>"`` for each verifier rule, then for
    each pass ``"pass <name>"`` (and ``"verify after <name>"``, all its rules together, when the pipeline checks
    each pass's output: ``passes/pipeline.CHECK_EACH_PASS``), and ``"allocate"``.
    ``kernel`` may carry a launch grid (``kernel[2, 4]``) and ``args`` may be arrays or ``nki.spec`` shapes.
    Raises ``NkiVerificationError`` (every broken rule) when the kernel is not valid, as its call would."""
    # deferred: `import nki_dsl` loads neither the verifier nor the passes; only a timed compile needs them
    from nki_dsl.passes.pipeline import compile_for_target
    from nki_dsl.passes.verifier import verify_kernel

    resolved = get_target(target)
    launch = as_launch(kernel)
    start = time.perf_counter()
    bound, _ = bind(launch.jit.fn, args, kwargs)
    ir = launch.jit._trace(bound, launch.grid, resolved)[0]
    times = {"trace": time.perf_counter() - start}
    verify_times: dict[str, float] = {}
    found = verify_kernel(ir, resolved, times=verify_times)
    times.update((f"verify {step}", seconds) for step, seconds in verify_times.items())
    if found:
        raise NkiVerificationError(found)
    compile_for_target(ir, resolved, times=times)
    return times
