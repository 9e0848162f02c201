"""The op table: every op the IR knows, listed once.

The verifier, printer, parser and each backend keep their own tables keyed by these names; a test fails when one
of them misses an op. Entries live in one module per API layer (``language`` for nl and structural ops, ``isa``
for nisa engine instructions).
"""

from __future__ import annotations

from nki_dsl.ir.ops.isa import ISA_OPS
from nki_dsl.ir.ops.language import LANGUAGE_OPS
from nki_dsl.ir.ops.spec import (
    ANY_BUFFER,
    DECLARED,
    HBM,
    ON_CHIP,
    REQUIRED,
    AttrKind,
    AttrSpec,
    Family,
    OperandSpec,
    OpSpec,
    Permutation,
    Role,
)

OPS: dict[str, OpSpec] = {}
for _spec in (*LANGUAGE_OPS, *ISA_OPS):
    if _spec.name in OPS:
        raise RuntimeError(f"op {_spec.name} is listed twice in the op table")
    OPS[_spec.name] = _spec
# The names of the table as written, for the per-op tables to check themselves against when imported (tests add
# test-only entries to OPS for a while; they are not in NAMES).
NAMES: frozenset[str] = frozenset(OPS)


def get(name: str) -> OpSpec:
    return OPS[name]


__all__ = ["OPS", "NAMES", "get", "OpSpec", "OperandSpec", "AttrSpec", "AttrKind", "Family", "Role", "Permutation",
           "DECLARED", "REQUIRED", "ON_CHIP", "HBM", "ANY_BUFFER"]  # fmt: skip
