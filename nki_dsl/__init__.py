"""nki_dsl: write, trace, verify and run NKI-style tile kernels without the hardware.

    import nki_dsl as nki
    import nki_dsl.language as nl

    @nki.jit
    def kernel(a): ...
    out = kernel[2, 2](a)            # runs on nki.default_backend(a): NumPy unless nki.use_backend says otherwise
    print(nki.trace(kernel[2, 2], a))  # the verified IR as text
    out, prof = nki.simulate(kernel, a, target="trn2")          # outputs and modelled timing
    prof = nki.benchmark(kernel, nki.spec((8192, 4096), "bfloat16"))  # timing from shapes alone
"""

from nki_dsl import (
    compiler,
    current,  # the current (0.6) NKI API front end (nki_dsl/current)
    isa,
    language,
    typing,
)
from nki_dsl.api import (
    TracedKernel,
    backend_names,
    baremetal,
    benchmark,
    default_backend,
    emit,
    parse_family,
    parse_ir,
    parse_ir_unverified,
    profile,
    prove_family,
    simulate_kernel,
    trace,
    use_backend,
)
from nki_dsl.errors import (
    InconclusiveDimensionError,
    NkiApiError,
    NkiError,
    NkiParseError,
    NkiShapeFamilyError,
    NkiTraceError,
    NkiVerificationError,
)
from nki_dsl.family import ShapeFamily
from nki_dsl.ir.budget import IRBudget
from nki_dsl.phase_times import phase_times
from nki_dsl.profiling import simulate
from nki_dsl.targets import Target, get_target
from nki_dsl.trace.jit import jit
from nki_dsl.trace.specs import spec, symbolic_shapes

__all__ = [
    "jit", "trace", "emit", "parse_ir", "parse_ir_unverified", "IRBudget", "TracedKernel", "backend_names",
    "default_backend", "use_backend",
    "Target", "get_target",
    "simulate", "simulate_kernel", "benchmark", "profile", "baremetal", "spec", "phase_times",
    "language", "isa", "typing", "compiler", "current",
    "NkiError", "NkiApiError", "NkiTraceError", "NkiVerificationError", "NkiParseError",
    "ShapeFamily", "parse_family", "prove_family", "symbolic_shapes", "NkiShapeFamilyError",
    "InconclusiveDimensionError",
]  # fmt: skip
