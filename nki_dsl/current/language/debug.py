"""``nl.device_print(print_prefix, tensor)`` of the current API (reference/nki.md §2.7): the legacy front end's
``nl.device_print`` op (``nki_dsl/language/debug.py``): the backends print the tensor's values to stdout where
the kernel runs it, as NKI's simulator does."""

from __future__ import annotations

from nki_dsl.language.debug import device_print as _device_print


def device_print(print_prefix, tensor):
    _device_print(print_prefix, tensor)
