"""The JAX backend: kernel IR lowered to ``jax.numpy`` / ``lax`` and compiled by XLA into one program.

``compile_kernel(kernel)`` builds the kernel's JAX function (by closures over the IR: no source is generated) and
``jax.jit``-s it once (the compiled programs live in a bounded table: ``executables``); its ``Executable.run`` takes
JAX or NumPy arrays by parameter name and returns JAX arrays.
Called on tracers (inside a user's ``jax.jit``, under ``jax.vmap`` or ``jax.grad``) it composes with the
surrounding JAX code. ``emit_source(kernel)`` returns the jaxpr the kernel lowers to. Multi-device runs:
``nki_dsl.jax``.
"""

from __future__ import annotations

import jax
import numpy as np

from nki_dsl.backends.jax import executables, indirect, runtime, runtime_loops
from nki_dsl.backends.jax.program import HANDLERS, build, to_held
from nki_dsl.errors import NkiError
from nki_dsl.ir.nodes import Kernel

__all__ = ["HANDLERS", "Executable", "compile_kernel", "emit_source"]


class Executable:
    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.info, self.fn = build(kernel)
        self._jitted = jax.jit(self.fn)
        self._owner = executables.new_owner()
        self._checks_rows = indirect.checks_rows(kernel) or runtime_loops.has_runtime_loops(kernel)

    def call(self, *arrays):
        """The kernel on positional arrays (JAX or NumPy, in parameter order): a tuple of JAX output arrays."""
        if len(arrays) != len(self.kernel.params):
            raise NkiError(f"kernel {self.kernel.name!r} takes {len(self.kernel.params)} arrays, got {len(arrays)}")
        held = [to_held(a, p.type) for a, p in zip(arrays, self.kernel.params)]
        try:
            if any(isinstance(h, jax.core.Tracer) for h in held):  # part of the caller's program
                outs, written = self._jitted(*held)
            else:
                outs, written = executables.get(self._owner, lambda: build(self.kernel)[1], held)(*held)
            if self._checks_rows:  # the bounds check raises when the program runs: wait for it here
                jax.block_until_ready((outs, written))
        except MemoryError:
            raise NkiError(f"kernel {self.kernel.name!r} ran out of memory on the JAX backend") from None
        except jax.errors.JaxRuntimeError as e:  # a bounds check (indirect DMA, runtime loop) raised in a callback
            raise indirect.runtime_error(e) from None
        # A kernel that writes into a parameter changes the caller's NumPy array, as the NumPy reference does (a
        # JAX array is immutable: the new value is only among the outputs then).
        for name, value in zip(self.info.written_params, written):
            target = arrays[[p.name for p in self.kernel.params].index(name)]
            if isinstance(target, np.ndarray) and target.flags.writeable:
                np.copyto(target, np.asarray(value).astype(target.dtype, copy=False))
        return outs

    def run(self, arrays: dict):
        outs = self.call(*(arrays[p.name] for p in self.kernel.params))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def compile_kernel(kernel: Kernel, target=None) -> Executable:
    """``target`` is part of the backend interface; the JAX backend models no hardware and ignores it."""
    return Executable(kernel)


def emit_source(kernel: Kernel, target=None) -> str:
    """The kernel's jaxpr (the program handed to XLA), for shape-and-dtype arguments of its parameters; ``target``
    is part of the backend interface and ignored here."""
    _, fn = build(kernel)
    specs = [jax.ShapeDtypeStruct(p.type.shape, runtime.storage_dtype(p.type.dtype)) for p in kernel.params]
    return str(jax.make_jaxpr(fn)(*specs))
