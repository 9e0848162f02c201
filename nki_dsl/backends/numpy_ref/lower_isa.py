"""NumPy lowering of ``nisa`` engine instructions, keyed by op name."""

from __future__ import annotations

ISA_HANDLERS: dict = {}
