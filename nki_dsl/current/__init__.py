"""The current (0.6) NKI API as a second front end over this project's tracer, IR, verifier and backends:
what ``import nki`` resolves to under ``nki_dsl.compat``.

    import nki_dsl.current as nki
    import nki_dsl.current.language as nl
    import nki_dsl.current.isa as nisa

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out, src=t)
        return out

    out = kernel(a)                       # NumPy reference
    out = nki.simulate(kernel)(a)         # NKI's CPU-simulator entry (engine simulator; .profile has the timing)
    out, prof = nki.simulate(kernel, a, target="trn3")   # this project's form
"""

from nki_dsl.current import isa, language
from nki_dsl.current.jit import CurrentKernel, jit
from nki_dsl.current.simulate import SimulatedKernel, cpu_simulate, simulate
from nki_dsl.errors import InconclusiveDimensionError, NkiApiError, NkiError, NkiTraceError, NkiVerificationError

__all__ = ["jit", "simulate", "cpu_simulate", "language", "isa", "CurrentKernel", "SimulatedKernel",
           "NkiError", "NkiApiError", "NkiTraceError", "NkiVerificationError",
           "InconclusiveDimensionError"]  # fmt: skip
