"""``nl.device_print(prefix, x)`` (reference/nki.md §2.7 device_print): print the values an SBUF or HBM tensor
holds at that point of the run, after a constant prefix. It is an ``nl.device_print`` op of the IR, so every
backend runs it where the kernel does (inside loops: once per iteration): the NumPy reference and the simulator
(which computes its outputs with the reference) print to stdout, as NKI's CPU simulator does; the JAX backend
prints through ``jax.debug.callback``. The cost model does not time it."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import build_op, is_tile


def device_print(prefix, x, *, mask=None):
    api = "nl.device_print"
    current(api)
    if not isinstance(prefix, str):
        raise NkiApiError(f"prefix must be a constant string, got {type(prefix).__name__}", caller_loc(), api)
    if not is_tile(x):
        raise NkiApiError(f"device_print prints a tensor, got {type(x).__name__}", caller_loc(), api)
    build_op(api, {"x": x}, {"prefix": prefix}, mask=mask)
