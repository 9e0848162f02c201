"""The op table: every op the IR knows, listed once.

The verifier, printer, parser and each backend keep their own tables keyed by these names; one test
(``tests/ir/test_op_table.py``) fails when any of them misses an op. Entries live in one module per API layer
(``language`` for nl and structural ops, ``isa`` for nisa engine instructions). An entry's fields are typed
(``spec.py``): ``Family``, ``Engine``, operand ``Role`` and ``Buffer``, ``AttrKind``, ``fn``, ``promote``, ``permutes``.

Adding an op, in order (the completeness test names the table you missed):

1. The entry: ``language.py`` (an ``nl`` op: a family; unary/binary/reduce ops are generated from
   ``ir.functions`` / ``REDUCTIONS``) or ``isa.py`` (a ``nisa`` instruction: family ``INSTRUCTION`` and its
   ``engine``), with operands (role, buffers), typed attributes, result buffer and dtype rule, and a result-shape
   rule (``shapes.py``) for any op that makes a tile. A new attribute kind needs a formatter in ``printer.py``
   and a reader in ``parser.py``.
2. The front end: the ``nl`` function (``nki_dsl/language/``, a thin ``build_op`` call) or the ``nisa`` function
   (``nki_dsl/isa/``, listed in ``isa.INSTRUCTIONS``).
3. The verifier reads the table; give it per-op facts only if a rule needs one (``verify/operands.py``).
4. Lowering: a ``lower-language`` rule (``passes/lower_language.py`` ``RULES``) for an ``nl`` op, or a documented
   ``passes/engines.py`` ``EXEMPT`` entry; a new function needs a form in ``passes/lower_math.py``.
5. Each backend's table: ``backends/numpy_ref`` (``LANGUAGE_HANDLERS`` / ``ISA_HANDLERS``; the import fails
   without it) and its function templates (``functions.py``); the JAX lowering; an instruction's cost rule in
   ``backends/simulator/cost.py`` citing its ``reference/nki.md`` section.
6. Tests: call it from ``tests/language`` (nl) or ``tests/isa`` (nisa) against a NumPy formula, then run
   ``tests/ir/test_op_table.py``.
"""

from __future__ import annotations

from nki_dsl.ir.ops.collectives import COLLECTIVE_OPS
from nki_dsl.ir.ops.isa import ISA_OPS
from nki_dsl.ir.ops.language import LANGUAGE_OPS
from nki_dsl.ir.ops.spec import (
    ANY_BUFFER,
    DECLARED,
    HBM,
    ON_CHIP,
    REDUCE_MASK,
    REQUIRED,
    AttrKind,
    AttrSpec,
    DtypeRule,
    Engine,
    Family,
    OperandSpec,
    OpSpec,
    Permutation,
    Role,
    reduce_mask_operand,
)

OPS: dict[str, OpSpec] = {}
for _spec in (*LANGUAGE_OPS, *ISA_OPS, *COLLECTIVE_OPS):
    if _spec.name in OPS:
        raise RuntimeError(f"op {_spec.name} is listed twice in the op table")
    OPS[_spec.name] = _spec
# The names of the table as written, for the per-op tables to check themselves against when imported (tests add
# test-only entries to OPS for a while; they are not in NAMES).
NAMES: frozenset[str] = frozenset(OPS)


def get(name: str) -> OpSpec:
    return OPS[name]


__all__ = ["OPS", "NAMES", "get", "OpSpec", "OperandSpec", "AttrSpec", "AttrKind", "DtypeRule", "Engine", "Family",
           "Role", "Permutation", "DECLARED", "REQUIRED", "ON_CHIP", "HBM", "ANY_BUFFER",
           "REDUCE_MASK", "reduce_mask_operand"]  # fmt: skip
