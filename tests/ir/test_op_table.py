"""Every per-op table is complete: the one test that fails when an op is added to ``nki_dsl/ir/ops`` and one of
the tables keyed by it is not (the checklist is in the ``nki_dsl.ir.ops`` docstring).

Each table is compared with the op table the same way: the op names it must cover, minus the names it has, is
empty, and it names no op the table does not have. Tables: the tracer's front end (``nl`` functions, ``nisa``
instructions), the verifier's and the printer/parser's, the ``lower-language`` rules, each backend's per-op
lowering (``BACKEND_TABLES``), the simulator's cost rules, and the tests that exercise each op.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import pytest

import nki_dsl.backends
import nki_dsl.current.isa as current_isa
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.numpy_ref import functions as numpy_functions
from nki_dsl.backends.simulator.cost import COMPUTE, DMA_RULES
from nki_dsl.ir import ops, parser, printer
from nki_dsl.ir.ops import AttrKind, Family
from nki_dsl.ir.types import Buffer
from nki_dsl.passes import lower_math
from nki_dsl.passes.engines import EXEMPT, NOT_INSTRUCTIONS
from nki_dsl.passes.lower_language import RULES
from nki_dsl.trace.tensor import NkiTensor
from nki_dsl.verify import operands as verify_operands

TESTS = pathlib.Path(__file__).parents[1]
ALL = ops.NAMES
INSTRUCTIONS = frozenset(n for n in ALL if ops.OPS[n].family is Family.INSTRUCTION)
LANGUAGE = ALL - INSTRUCTIONS
NL = frozenset(n for n in ALL if n.startswith("nl."))

# Each backend's per-op table: (what it is, how to load it, the ops it must cover). A backend package under
# nki_dsl/backends/ fails test_every_backend_package_has_a_table until it is listed here. The JAX backend
# (nki_dsl/backends/jax/) joins with its lowering table, e.g.
#     "jax": ("jax lowering", lambda: importlib.import_module("nki_dsl.backends.jax.lowering").LOWERINGS, ALL),
BACKEND_TABLES = {
    "numpy_ref": ("numpy_ref.HANDLERS", lambda: importlib.import_module("nki_dsl.backends.numpy_ref").HANDLERS, ALL),
    "jax": ("jax.HANDLERS", lambda: importlib.import_module("nki_dsl.backends.jax").HANDLERS, ALL),
    # The simulator times lowered IR: engine instructions, each priced by a cost rule (simulator/cost.py).
    "simulator": ("simulator cost rules (COMPUTE + DMA_RULES)", lambda: {**COMPUTE, **DMA_RULES}, INSTRUCTIONS),
}

# Ops no nl/nisa function is named after, and the front end that emits each.
STRUCTURAL_FRONT_ENDS = {
    "alloc": lambda: callable(nl.ndarray),  # nl.ndarray / nl.zeros / outputs
    "assign": lambda: hasattr(NkiTensor, "__setitem__") and hasattr(NkiTensor, "__iadd__"),  # t[...] = x, t += x
    "hbm.reshape": lambda: hasattr(NkiTensor, "reshape"),  # hbm_tensor.reshape(shape)
    "hbm.view": lambda: hasattr(NkiTensor, "view"),  # hbm_tensor.view(dtype)
}


def _check(table: str, need: frozenset[str] | set[str], have) -> None:
    have = set(have)
    missing, unknown = sorted(set(need) - have), sorted(have - ALL)
    assert not missing, f"{table} has no entry for {missing}"
    assert not unknown, f"{table} names ops the op table does not have: {unknown}"


# -- front end -----------------------------------------------------------------------------------------------------


def test_every_op_has_a_front_end():
    nl_functions = {f"nl.{n}" for n in dir(nl) if f"nl.{n}" in NL and callable(getattr(nl, n))}
    _check("nki_dsl.language", NL, nl_functions)
    # (the instructions only the current API has are current_isa.CURRENT_ONLY)
    instructions = {f"nisa.{n}" for n in (*nisa.INSTRUCTIONS, *current_isa.CURRENT_ONLY)}
    _check("nki_dsl.isa.INSTRUCTIONS", INSTRUCTIONS, instructions)
    structural = LANGUAGE - NL
    _check("STRUCTURAL_FRONT_ENDS", structural, STRUCTURAL_FRONT_ENDS)
    assert all(emits() for emits in STRUCTURAL_FRONT_ENDS.values())


def test_every_instruction_names_its_engine_and_no_language_op_does():
    assert {n for n in ALL if ops.OPS[n].engine is not None} == INSTRUCTIONS


# -- verifier, printer and parser -----------------------------------------------------------------------------------


def test_every_op_that_makes_a_tile_has_a_result_shape_rule():
    # the tracer infers result types and the verifier re-checks them with it
    _check("OpSpec.shape", {n for n in ALL if ops.OPS[n].result not in (None, ops.DECLARED)},
           {n for n in ALL if ops.OPS[n].shape is not None})  # fmt: skip


def test_op_names_the_verifier_keys_on_are_ops():
    _check("verify.operands.WRITE_INSTRUCTIONS", set(), verify_operands.WRITE_INSTRUCTIONS)


def test_every_attribute_kind_has_a_text_form_both_ways():
    assert set(printer.ATTR_FORMATS) == set(parser.ATTR_PARSERS) == set(AttrKind)
    used = {a.kind for spec in ops.OPS.values() for a in spec.attrs}
    assert used <= set(AttrKind)


# -- lowering ------------------------------------------------------------------------------------------------------


def test_every_language_op_has_a_lowering_rule_or_a_documented_exemption():
    # lowered IR holds engine instructions, the ops that are not instructions, and the documented exemptions
    lowered = set(RULES) | set(EXEMPT) | set(NOT_INSTRUCTIONS)
    _check("lower-language RULES + EXEMPT + NOT_INSTRUCTIONS", LANGUAGE, lowered)
    assert not set(RULES) & set(EXEMPT)
    assert all(why for _, why in EXEMPT.values())


def test_every_function_an_nl_op_computes_has_a_lowering():
    # the unary and reduce rules lower each function to an instruction, a rewrite (VECTOR_FORMS, REDUCE_FORMS) or
    # the Scalar engine's activation of the same name
    activations = set(ops.OPS["nisa.activation"].attr("op").choices)
    reducible = set(ops.OPS["nisa.tensor_reduce"].attr("op").choices)
    for family, forms in ((Family.UNARY, set(lower_math.VECTOR_FORMS) | activations),
                          (Family.REDUCE, set(lower_math.REDUCE_FORMS) | reducible),
                          (Family.BINARY, set(ops.OPS["nisa.tensor_tensor"].attr("op").choices))):  # fmt: skip
        fns = {ops.OPS[n].fn for n in LANGUAGE if ops.OPS[n].family is family}
        assert fns <= forms, f"{family} functions with no lowering: {sorted(fns - forms)}"


# -- backends ------------------------------------------------------------------------------------------------------


def test_every_backend_package_has_a_table():
    packages = {m.name for m in pkgutil.iter_modules(nki_dsl.backends.__path__) if m.ispkg}
    unlisted, gone = sorted(packages - set(BACKEND_TABLES)), sorted(set(BACKEND_TABLES) - packages)
    assert not unlisted, f"backends {unlisted} have no per-op table in BACKEND_TABLES (tests/ir/test_op_table.py)"
    assert not gone, f"BACKEND_TABLES lists backends that no longer exist: {gone}"


@pytest.mark.parametrize("backend", sorted(BACKEND_TABLES))
def test_every_backend_lowers_every_op(backend):
    what, load, need = BACKEND_TABLES[backend]
    _check(what, need, load())


def test_every_function_an_op_may_compute_has_a_numpy_template():
    unary, binary = set(numpy_functions.UNARY_TEMPLATES), set(numpy_functions.BINARY_TEMPLATES)
    for name in ALL:
        spec = ops.OPS[name]
        if spec.family is Family.UNARY:
            assert spec.fn in unary, name
        if spec.family is Family.BINARY:
            assert spec.fn in binary, name
        for a in spec.attrs:
            if a.kind is AttrKind.FN:
                fns = set(a.choices) - {"none"}
                assert fns <= unary | binary, f"{name} {a.name}: no NumPy template for {sorted(fns - unary - binary)}"


def test_dma_instructions_and_only_they_are_priced_by_dma_rules():
    assert not set(COMPUTE) & set(DMA_RULES)
    assert {n for n in DMA_RULES} == {n for n in INSTRUCTIONS if ops.OPS[n].engine == "dma"}


# -- tests ---------------------------------------------------------------------------------------------------------


def _exercised(folder: str, namespace: str) -> set[str]:
    """``<namespace>.<name>`` for every op a module of ``tests/<folder>`` calls as ``<namespace>.<name>(...)``; when
    the folder's modules call ops by name (``getattr(<namespace>, name)``), also every name that is a key of a
    module-level table or a string argument of a call (``unary_kernel(x, "invert")``)."""
    called, named, by_name = set(), set(), False
    for path in (TESTS / folder).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == namespace:
                called.add(f.attr)
            if isinstance(f, ast.Name) and f.id == "getattr" and node.args:
                by_name |= isinstance(node.args[0], ast.Name) and node.args[0].id == namespace
            named |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict):
                named |= {k.value for k in stmt.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return {f"{namespace}.{n}" for n in called | (named if by_name else set())}


def test_every_op_is_exercised_by_a_test():
    # a new op fails here until a test in tests/language (nl ops) or tests/isa (instructions) uses it
    assert NL - _exercised("language", "nl") == set()
    assert INSTRUCTIONS - _exercised("isa", "nisa") == set()


# -- the entries themselves ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: ops.OpSpec("test.op", "unray", ()),
    lambda: ops.OpSpec("test.op", Family.INSTRUCTION, (), engine="vectr"),
    lambda: ops.OpSpec("test.op", Family.UNARY, (), result="spum"),
    lambda: ops.OpSpec("test.op", Family.UNARY, (), result_dtype="float31"),
    lambda: ops.OperandSpec("x", role="read"),
    lambda: ops.OperandSpec("x", buffers=("sbuf", "l2")),
    lambda: ops.AttrSpec("axis", "tuple"),
], ids=["family", "engine", "result", "result_dtype", "role", "buffer", "kind"])  # fmt: skip
def test_a_misspelt_field_fails_where_the_entry_is_written(make):
    with pytest.raises(ValueError):
        make()


def test_fields_written_as_strings_are_normalised_to_their_types():
    spec = ops.OpSpec("test.op", "unary", (ops.OperandSpec("x", role="inout", buffers=("psum",)),), result="psum")
    assert spec.family is Family.UNARY and spec.result is Buffer.PSUM
    assert spec.operands[0].role is ops.Role.INOUT and spec.operands[0].buffers == (Buffer.PSUM,)
    assert all(isinstance(b, Buffer) for s in ops.OPS.values() for o in s.operands for b in o.buffers)
