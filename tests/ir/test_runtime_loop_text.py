"""The text form of runtime loops (nki_dsl/ir/runtime_loops.py): ``dynamic``/``while``/``scalar_offset`` loops
with ``reads`` print and read back as they were, through the fast reader and lark alike. The random kernels of
``strategies.py`` draw them among the other loop kinds (so the general round-trip properties cover them too);
here every drawn kernel runs inside one, so none is filtered out."""

from hypothesis import given, settings
from hypothesis import strategies as st

from nki_dsl.errors import SourceLoc
from nki_dsl.ir import parser
from nki_dsl.ir.budget import DEFAULT_BUDGET
from nki_dsl.ir.fastread import Reader
from nki_dsl.ir.nodes import Loop
from nki_dsl.ir.printer import print_kernel
from nki_dsl.ir.runtime_loops import KINDS

from .strategies import kernels
from .support import structure, unlinked_tensors


@st.composite
def runtime_kernels(draw):
    """A random kernel whose body runs inside a runtime loop reading its first parameter."""
    kernel = draw(kernels())
    kind = draw(st.sampled_from(KINDS))
    start, stop, step = (draw(st.integers(-4, 64)) for _ in range(3))
    loc = SourceLoc(kernel.source_file, draw(st.integers(1, 999)))
    reads = kernel.params[0].full_access()
    kernel.body = [Loop(kind, "i999", start, stop, step, kernel.body, loc, reads)]
    return kernel


def _runtime_loops(kernel) -> list[Loop]:
    return [s for s, _ in kernel.walk() if isinstance(s, Loop) and s.runtime]


@settings(max_examples=15, deadline=None)  # (lark's parse is most of the time; the general properties draw more)
@given(runtime_kernels())
def test_runtime_loops_round_trip_through_both_readers(kernel):
    text = print_kernel(kernel)
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(text).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(text))
    for parsed in (fast, slow):
        assert print_kernel(parsed) == text
        assert structure(parsed) == structure(kernel)
        assert unlinked_tensors(parsed) == []
    for before, after in zip(_runtime_loops(kernel), _runtime_loops(fast), strict=True):
        assert (after.kind, after.stop, after.reads.shape) == (before.kind, before.stop, before.reads.shape)
