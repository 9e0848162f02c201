"""``TileHandle``: what every trace-time tensor handle is to the code that builds ops, an IR access.

``trace.semantics`` accepts any handle as an operand through this base class; the handles themselves
(``trace.tensor``) add Python operators that build ops through ``semantics``. Keeping the base here lets both
import it without importing each other.
"""

from __future__ import annotations

from nki_dsl.ir.nodes import Access


class TileHandle:
    __slots__ = ()

    def access(self) -> Access:
        raise NotImplementedError
