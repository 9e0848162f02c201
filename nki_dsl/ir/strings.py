"""Which strings IR text may hold: printable text only.

A string in IR text (the kernel's source file, a loc's file name, a constant's key or value, a string attribute)
is data that backends may show in messages. It must never become code, and the first defence is that it cannot
even look like code's line structure: no control characters (NUL, newline, U+0085 NEL, ...), no line or paragraph
separators (U+2028, U+2029), no format characters (bidi overrides such as U+202E, zero-width joiners), no
surrogates and no unassigned code points. ``str.isprintable`` is exactly that set (it also refuses spaces other
than U+0020), so the rule is one C-speed call. The printer refuses what the parser would, so the text form stays
the parser's exact inverse.
"""

from __future__ import annotations

import unicodedata


def unsafe_char(s: str) -> tuple[int, str] | None:
    """``(index, character)`` of the first character an IR string may not hold, or None when it is safe."""
    if s.isprintable():
        return None
    for k, c in enumerate(s):
        if not c.isprintable():
            return k, c
    return None  # unreachable: isprintable() is False only if some character is not printable


def describe_char(c: str) -> str:
    """``U+000A (LINE FEED, a control character)``: a character named without printing it."""
    name = unicodedata.name(c, "")
    if not name and unicodedata.category(c) == "Cc":
        name = {"\x00": "NUL", "\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\t": "TAB", "\x85": "NEXT LINE"}.get(c, "")
    kind = _KINDS.get(unicodedata.category(c), "not printable")
    return f"U+{ord(c):04X} ({name + ', ' if name else ''}{kind})"


_KINDS = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space other than U+0020",
}
