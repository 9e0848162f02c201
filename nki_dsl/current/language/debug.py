"""``nl.device_print(print_prefix, tensor)`` (reference/nki.md §2.7): the simulator prints a tensor's values.
The IR has no print instruction, so values cannot be printed when the kernel runs; the call is checked (a
constant prefix, an SBUF or HBM tensor) and says once per kernel line that nothing will be printed, so a debugging
kernel still runs unmodified and the user knows why the output is missing."""

from __future__ import annotations

import warnings

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import is_tile


def device_print(print_prefix, tensor):
    current("nl.device_print")
    if not isinstance(print_prefix, str):
        raise NkiApiError(f"print_prefix must be a constant string, got {type(print_prefix).__name__}", caller_loc(),
                          "nl.device_print")  # fmt: skip
    if not is_tile(tensor) or tensor.access().tensor.type.buffer.value == "psum":
        raise NkiApiError("device_print prints an SBUF or HBM tensor", caller_loc(), "nl.device_print")
    warnings.warn(f"{caller_loc()}: nl.device_print({print_prefix!r}, ...) prints nothing: nki_dsl does not model "
                  f"printing from a running kernel", stacklevel=2)  # fmt: skip
