"""Hardware numbers live in ``nki_dsl/targets.py`` only: a number of the target table written as a literal anywhere
else in ``nki_dsl/`` is a copy that can drift (as a 192 KiB SBUF partition did while trn2 has 224 KiB).

Every numeric value of every Target (fields and derived properties) of 64 or more is looked for, as a literal or
as a product of literals (``224 * 1024``); smaller ones (2, 4, 8, 16, 60) are too common as plain counts to tell
apart. What remains is allowed below, each with the reason it is not a hardware fact."""

from __future__ import annotations

import ast
import dataclasses
import operator
from pathlib import Path

from nki_dsl.targets import TARGETS, Target

CORE = Path(__file__).parents[1] / "nki_dsl"
SMALLEST = 64

# Values that are not hardware facts wherever they appear in the core.
GENERIC = {
    100: "percentages (100 * fraction) in summaries",
}
# (file relative to nki_dsl/, value): why that literal is not a copy of a target's number.
ALLOWED = {
    ("ir/fastread.py", 64): "MAX_NESTING: how deep the fast reader recurses before handing text to lark",
    ("ir/budget.py", 256): "max_expression_terms: a budget on untrusted IR text, not a machine size",
    ("trace/specs.py", 256): "lru_cache size of the signature cache",
    ("backends/jax/batch_plan.py", 4096): "lru_cache size of the JAX batching plan's index-splitting cache",
    ("backends/simulator/dma_pool.py", 256): "KEEP: free-list pieces the DMA pool keeps, an implementation size",
    ("current/isa/composed.py", 16384): "max8's documented input limit in elements per partition (§2.7 max8)",
}

_OPS = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub, ast.FloorDiv: operator.floordiv,
        ast.Pow: operator.pow, ast.LShift: operator.lshift}  # fmt: skip


def _target_numbers() -> set:
    names = [f.name for f in dataclasses.fields(Target)]
    names += [n for n, v in vars(Target).items() if isinstance(v, property)]
    values = set()
    for t in TARGETS.values():
        for n in names:
            v = getattr(t, n)
            if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) >= SMALLEST:
                values.add(v)
    return values


def _value(node):
    """The number ``node`` spells with literals only (a constant, or arithmetic on constants), else None."""
    if isinstance(node, ast.Constant):
        v = node.value
        return v if isinstance(v, int | float) and not isinstance(v, bool) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _value(node.left), _value(node.right)
        return None if a is None or b is None else _OPS[type(node.op)](a, b)
    return None


def literal_copies(tree: ast.AST, numbers: set) -> list[tuple[int, object]]:
    found, inside = [], set()
    for node in ast.walk(tree):  # parents before children: an expression is judged whole, its parts not again
        if id(node) in inside:
            continue
        v = _value(node)
        if v is None:
            continue
        inside.update(id(n) for n in ast.walk(node))
        if v in numbers:
            found.append((node.lineno, v))
    return found


def test_no_core_module_repeats_a_number_of_the_target_table():
    numbers = _target_numbers() - set(GENERIC)
    assert {128, 512, 2048, 192 * 1024, 224 * 1024, 1300.0} <= numbers  # the scan looks for the numbers that drift
    problems = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        if rel == "targets.py":
            continue
        for line, v in literal_copies(ast.parse(path.read_text()), numbers):
            if (rel, v) not in ALLOWED:
                problems.append(f"nki_dsl/{rel}:{line}: {v} is a number of nki_dsl/targets.py; read it from the Target")
    assert not problems, "\n".join(problems)


def test_the_scan_finds_copies_and_judges_an_expression_whole():
    numbers = _target_numbers()
    tree = ast.parse("SBUF = 224 * 1024\nPMAX = 128\nN = 2 * 3\nK = 7 * 1024\n")
    assert literal_copies(tree, numbers) == [(1, 224 * 1024), (2, 128)]


def test_every_allowed_literal_is_still_there():
    # an allowance whose literal is gone must go too, or it would silently admit a future copy
    numbers = _target_numbers()
    present = set()
    for path in CORE.rglob("*.py"):
        rel = path.relative_to(CORE).as_posix()
        present.update((rel, v) for _, v in literal_copies(ast.parse(path.read_text()), numbers))
    assert set(ALLOWED) <= present, sorted(set(ALLOWED) - present)
