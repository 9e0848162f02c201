"""Every ``nl.*`` op of the op table has a test in this directory: adding an op without one fails here."""

from pathlib import Path

from nki_dsl.ir.ops import OPS
from tests.language import (
    test_binary,
    test_compare_logical_bitwise,
    test_creation,
    test_matmul,
    test_movement,
    test_random,
    test_reductions,
    test_shared_constant,
    test_unary,
    test_where,
)

# nl ops each test module covers outside its op tables, checked against its source: called as nl.<op>(...) or
# named as "<op>" where a kernel calls getattr(nl, op).
COVERED_BY_KERNELS = {
    test_compare_logical_bitwise: {"logical_not", "invert"},
    test_creation: {"full"},
    test_matmul: {"matmul"},
    test_movement: {"load", "store", "copy", "load_transpose2d", "transpose", "broadcast_to", "expand_dims"},
    test_random: {"dropout", "random_seed"},
    test_where: {"where"},
    test_shared_constant: {"shared_constant"},
}


def covered() -> set[str]:
    names = set(test_unary.UNARY) | set(test_binary.BINARY) | set(test_reductions.REDUCTIONS)
    names |= set(test_compare_logical_bitwise.COMPARISONS) | set(test_compare_logical_bitwise.LOGICAL)
    names |= set(test_compare_logical_bitwise.BITWISE)
    for module, ops in COVERED_BY_KERNELS.items():
        source = Path(module.__file__).read_text()
        missing = [op for op in ops if f"nl.{op}(" not in source and f'"{op}"' not in source]
        assert not missing, f"{module.__name__} no longer calls {missing}"
        names |= ops
    return {f"nl.{n}" for n in names}


def test_every_nl_op_is_tested():
    nl_ops = {name for name in OPS if name.startswith("nl.")}
    untested = sorted(nl_ops - covered())
    assert not untested, f"nl ops without a test in tests/language: {untested}"


def test_tables_name_only_real_ops():
    stale = sorted(covered() - set(OPS))
    assert not stale, f"tests/language tables name ops the op table does not have: {stale}"
