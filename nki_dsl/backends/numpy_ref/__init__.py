"""The NumPy reference backend: the executable specification every other backend is tested against.

``emit_source(kernel)`` returns the generated Python; ``compile_kernel(kernel)`` compiles it once into an
``Executable`` whose ``run`` takes the kernel's arrays by parameter name.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.backends.numpy_ref import functions as fn_module
from nki_dsl.backends.numpy_ref import runtime
from nki_dsl.backends.numpy_ref.collectives import COLLECTIVE_HANDLERS
from nki_dsl.backends.numpy_ref.emitter import KERNEL_FN, Emitter
from nki_dsl.backends.numpy_ref.lower_isa import ISA_HANDLERS
from nki_dsl.backends.numpy_ref.lower_language import LANGUAGE_HANDLERS
from nki_dsl.backends.numpy_ref.runtime_loops import TripLog
from nki_dsl.errors import NkiError
from nki_dsl.ir import cores, ops
from nki_dsl.ir.nodes import Kernel
from nki_dsl.targets import Target

# One handler per op, by op name. The reference is the executable spec, so it must know every op: an op added to
# the table without a handler fails here, when the backend is imported, not when a kernel first uses it.
HANDLERS = {**LANGUAGE_HANDLERS, **ISA_HANDLERS, **COLLECTIVE_HANDLERS}
if set(HANDLERS) != ops.NAMES or set(LANGUAGE_HANDLERS) & set(ISA_HANDLERS):
    raise RuntimeError(
        f"the NumPy handlers and the op table disagree: no handler for {sorted(ops.NAMES - set(HANDLERS))}, "
        f"handlers of unknown ops {sorted(set(HANDLERS) - ops.NAMES)}, "
        f"listed twice {sorted(set(LANGUAGE_HANDLERS) & set(ISA_HANDLERS))}"
    )


def emit_source(kernel: Kernel, target: Target | None = None) -> str:
    """The generated Python of ``kernel``; ``target`` is part of the backend interface and ignored here."""
    return Emitter(kernel, HANDLERS).emit()


class Executable:
    def __init__(self, kernel: Kernel):
        emitter = Emitter(kernel, HANDLERS)
        self.kernel = kernel
        self.source = emitter.emit()
        self.trips = TripLog(emitter.runtime_loops)  # the runtime loops' trip counts of the last run
        namespace = {
            "_rl": self.trips,
            "np": np, "ROUND": runtime.ROUND, "alloc_on_chip": runtime.alloc_on_chip,
            "alloc_hbm": runtime.alloc_hbm, "to_hbm": runtime.to_hbm, "RandomState": runtime.RandomState,
            "Meet": cores.Meet, "run_cores": cores.run_cores, "BITCAST": runtime.bitcast,
            "fn": fn_module, **emitter.namespace,
        }  # fmt: skip
        try:
            code = compile(self.source, "<nki_dsl numpy kernel>", "exec")
        except (SyntaxError, RecursionError, MemoryError) as e:  # budgets keep verified IR far from these
            raise NkiError(f"the NumPy backend cannot compile kernel {kernel.name!r}: {type(e).__name__}") from None
        exec(code, namespace)
        self._fn = namespace[KERNEL_FN]

    def run(self, arrays: dict):
        args = []
        for p in self.kernel.params:
            a = arrays[p.name]
            args.append(a if isinstance(a, np.ndarray) else np.asarray(a))
        self.trips.reset()
        try:
            with np.errstate(all="ignore"):  # poison values and masked-out lanes may overflow; that is expected
                outs = self._fn(*args)
        except MemoryError:  # the budgets bound the kernel's memory, but not what this machine has free
            raise NkiError(f"kernel {self.kernel.name!r} ran out of memory on the NumPy backend") from None
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def compile_kernel(kernel: Kernel, target: Target | None = None) -> Executable:
    """``target`` is part of the backend interface; the NumPy reference models no hardware and ignores it."""
    return Executable(kernel)
