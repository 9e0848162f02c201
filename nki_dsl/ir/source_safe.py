"""What code generators may write into generated Python from IR: the only doors untrusted IR has into source.

Backends that generate Python (the NumPy reference, the simulator's unroller) write IR values into source only
through these functions: integers as ``int`` literals, variables as validated ``i<N>`` / ``pid<N>`` / ``d<N>``
names, tensors as identifiers derived injectively from their names (``t_<name>`` for ASCII names, ``tx_<hex>``
otherwise, so no name is a keyword, clashes with a helper, or folds into another under Python's NFKC
normalisation of identifiers), strings only as ``repr`` literals. Kernel names, file names and locations never
reach source at all (not even comments). Each refusal is an ``NkiError``: verified IR never triggers one; they
stop IR that skipped the verifier.
"""

from __future__ import annotations

import re

from nki_dsl.errors import NkiError
from nki_dsl.ir.affine import var_kind

_ASCII_NAME = re.compile(r"[A-Za-z0-9_]+")


class NkiCodegenError(NkiError):
    """An IR value that cannot be written into generated source (IR that did not pass the verifier)."""


def py_int(value) -> str:
    """An int (bools refused) as a literal."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise NkiCodegenError(f"{value!r} is not an int and cannot be written into generated code")
    return str(int(value))  # int(): an int subclass's str could be anything


def py_ints(values) -> str:
    """A tuple of ints as a tuple literal."""
    items = [py_int(v) for v in values]
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def py_var(name, kind: str | None = None) -> str:
    """An affine variable (``i3``, ``pid0``, ``d1``), checked to be one (of ``kind``, if given)."""
    try:
        actual = var_kind(name)
    except ValueError:
        actual = None
    if actual is None or kind is not None and actual != kind:
        raise NkiCodegenError(f"{name!r} is not a {kind or 'variable'} name and cannot be written into generated code")
    return name


def py_tensor(name) -> str:
    """The identifier generated code holds tensor ``name`` in."""
    if not isinstance(name, str) or not name:
        raise NkiCodegenError(f"tensor name {name!r} cannot be written into generated code")
    if _ASCII_NAME.fullmatch(name):
        return f"t_{name}"
    return f"tx_{name.encode('utf-8', 'surrogatepass').hex()}"


def py_str(value) -> str:
    """A string as a literal."""
    if not isinstance(value, str):
        raise NkiCodegenError(f"{value!r} is not a string")
    return repr(str(value))
