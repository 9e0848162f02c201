"""The text form of runtime loops (nki_dsl/ir/runtime_loops.py): ``dynamic``/``while`` loops with ``reads``
print and read back as they were, through the fast reader and lark alike; the random kernels of
``strategies.py`` draw them among the other loop kinds (so the general round-trip properties cover them too)."""

from hypothesis import assume, given, settings

from nki_dsl.ir import parser
from nki_dsl.ir.budget import DEFAULT_BUDGET
from nki_dsl.ir.fastread import Reader
from nki_dsl.ir.nodes import Loop
from nki_dsl.ir.printer import print_kernel

from .strategies import kernels
from .support import structure, unlinked_tensors


def _runtime_loops(kernel) -> list[Loop]:
    return [s for s, _ in kernel.walk() if isinstance(s, Loop) and s.runtime]


@settings(max_examples=15, deadline=None)  # (lark's parse is most of the time; the general properties draw more)
@given(kernels())
def test_runtime_loops_round_trip_through_both_readers(kernel):
    assume(_runtime_loops(kernel))
    text = print_kernel(kernel)
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(text).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(text))
    for parsed in (fast, slow):
        assert print_kernel(parsed) == text
        assert structure(parsed) == structure(kernel)
        assert unlinked_tensors(parsed) == []
    for before, after in zip(_runtime_loops(kernel), _runtime_loops(fast)):
        assert (after.kind, after.stop, after.reads.shape) == (before.kind, before.stop, before.reads.shape)
