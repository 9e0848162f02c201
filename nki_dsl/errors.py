"""Errors raised by nki_dsl, each carrying the kernel source location it is about.

Every diagnostic the user sees reads like ``file.py:LINE: op: message``; the location is the kernel line that
created the op (recorded at trace time and kept in the IR text), so parsed IR reports the same places.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A kernel source position. ``file`` is stored as given; messages show its base name."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


UNKNOWN_LOC = SourceLoc("<unknown>", 0)


class NkiError(Exception):
    """Base class: a problem with a kernel, its IR or its use, at a source location."""

    def __init__(self, message: str, loc: SourceLoc | None = None, op: str | None = None):
        self.loc = loc
        self.op = op
        self.bare_message = message
        parts = []
        if loc is not None and loc != UNKNOWN_LOC:
            parts.append(str(loc))
        if op:
            parts.append(op)
        parts.append(message)
        super().__init__(": ".join(parts))


class NkiTraceError(NkiError):
    """The kernel body did something the tracer cannot capture (misuse of the language)."""


class InconclusiveDimensionError(NkiTraceError):
    """A symbolic dimension of a shape family was used where the kernel needs its concrete value (a Python ``if``
    the declared ranges do not decide, ``int(N)``, a tile of ``N``): JAX's ``InconclusiveDimensionOperation``. The
    message names the dimension, its range and the kernel line (``trace/symbolic.py`` raises it)."""


class NkiVerificationError(NkiError):
    """The IR breaks a hardware or language rule. ``diagnostics`` holds every rule broken, in program order."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        first = diagnostics[0]
        more = f" (and {len(diagnostics) - 1} more)" if len(diagnostics) > 1 else ""
        super().__init__(first.message + more, first.loc, first.op)

    # How many diagnostics the message lists: hostile IR can break a rule thousands of times (3,000 unbindable
    # symbols made a 329 KB message, passed on whole by the Hub's refusal); ``diagnostics`` keeps every one.
    MAX_LISTED = 50

    def __str__(self) -> str:
        shown = [str(d) for d in self.diagnostics[: self.MAX_LISTED]]
        rest = len(self.diagnostics) - len(shown)
        if rest > 0:
            shown.append(f"... and {rest} more diagnostics (NkiVerificationError.diagnostics holds every one)")
        return "\n".join(shown)


class NkiShapeFamilyError(NkiError):
    """A call's arrays do not fit a shape family (rank, a fixed dimension, a symbol outside its declared range)."""


class NkiRuntimeError(NkiError):
    """A check that needs the data failed while the kernel ran (an indirect DMA's row index out of range)."""


class NkiParseError(NkiError):
    """IR text that does not follow the grammar."""


class NkiApiError(NkiError, TypeError):
    """The Python API was called wrongly (outside a kernel, unknown keyword, wrong argument type)."""


@dataclass(frozen=True)
class Diagnostic:
    """One broken rule: where, which op, which rule (a short stable id for tests) and the full message."""

    loc: SourceLoc
    op: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: {self.op}: {self.message}"
