"""The NumPy reference backend: the executable specification every other backend is tested against.

``emit_source(kernel)`` returns the generated Python; ``compile_kernel(kernel)`` compiles it once into an
``Executable`` whose ``run`` takes the kernel's arrays by parameter name.
"""

from __future__ import annotations

import numpy as np

from nki_dsl.backends.numpy_ref import functions as fn_module
from nki_dsl.backends.numpy_ref import runtime
from nki_dsl.backends.numpy_ref.emitter import Emitter, py_name
from nki_dsl.backends.numpy_ref.lower_isa import ISA_HANDLERS
from nki_dsl.backends.numpy_ref.lower_language import FAMILY_HANDLERS
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS


def _handlers() -> dict:
    table = {}
    for name, spec in OPS.items():
        handler = ISA_HANDLERS.get(name) or FAMILY_HANDLERS.get(spec.family)
        if handler is not None:
            table[name] = handler
    return table


HANDLERS = _handlers()


def emit_source(kernel: Kernel) -> str:
    return Emitter(kernel, HANDLERS).emit()


class Executable:
    def __init__(self, kernel: Kernel):
        emitter = Emitter(kernel, HANDLERS)
        self.kernel = kernel
        self.source = emitter.emit()
        namespace = {
            "np": np, "ROUND": runtime.ROUND, "alloc_on_chip": runtime.alloc_on_chip,
            "alloc_hbm": runtime.alloc_hbm, "to_hbm": runtime.to_hbm, "RandomState": runtime.RandomState,
            "fn": fn_module, **emitter.namespace,
        }  # fmt: skip
        code = compile(self.source, f"<nki_dsl numpy: {kernel.name}>", "exec")
        exec(code, namespace)
        self._fn = namespace[py_name(kernel.name)]

    def run(self, arrays: dict):
        args = []
        for p in self.kernel.params:
            a = arrays[p.name]
            args.append(a if isinstance(a, np.ndarray) else np.asarray(a))
        with np.errstate(all="ignore"):  # poison values and masked-out lanes may overflow; that is expected
            outs = self._fn(*args)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def compile_kernel(kernel: Kernel, target: str = "trn2") -> Executable:
    """``target`` is part of the backend interface; the NumPy reference models no hardware and ignores it."""
    return Executable(kernel)
