"""The fast reader (``ir/fastread.py``) reads all the printer writes, without falling back to lark, and builds
what lark builds; text it is unsure of goes to lark, which decides."""

import pytest
from hypothesis import given, settings

from nki_dsl.ir import parser
from nki_dsl.ir.budget import DEFAULT_BUDGET
from nki_dsl.ir.fastread import FallbackError, Reader
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.printer import print_kernel
from tests.examples import examples

from .strategies import kernels
from .support import EVERY_KIND
from .test_golden import GOLDEN
from .test_parse_errors import VALID


def _both(text: str) -> tuple[str, str]:
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(text).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(text))
    return print_kernel(fast), print_kernel(slow)


@pytest.mark.usefixtures("every_kind_op")
@settings(max_examples=examples(100), deadline=None)
@given(kernels({**OPS, EVERY_KIND.name: EVERY_KIND}))
def test_the_fast_reader_reads_every_printed_kernel_as_lark_does(kernel):
    text = print_kernel(kernel)
    fast, slow = _both(text)
    assert fast == slow == text


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_files_and_free_whitespace(path):
    text = path.read_text(encoding="utf-8")
    squashed = " ".join(text.split()).replace(" + ", "+").replace(", ", ",")
    for t in (text, squashed, text.replace("\n", "\r\n\t")):
        fast, slow = _both(t)
        assert fast == slow == text


@pytest.mark.parametrize(
    "text",
    [VALID.replace("kernel k", "kernelk"), VALID.replace("loc(8)", "loc(8) $"),
     VALID.replace("grid (2,)", "grid (\u2028)"), VALID.replace("affine i0", "affine.x i0"), VALID[:-3]],
)  # fmt: skip
def test_what_the_fast_reader_is_unsure_of_goes_to_lark(text):
    with pytest.raises(FallbackError):
        Reader(text).start()


def test_the_fast_reader_reads_shape_families_as_lark_does():
    import nki_dsl as nki
    from kernels.softmax.kernel import softmax_kernel

    text = nki.trace(softmax_kernel, nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})).text
    extra = text.replace("  grid ()", "  symbol $M = 2*$N + 1\n  symbol $K in [0, 3]\n  grid ()")
    for t in (text, extra, " ".join(text.split())):
        Reader(t).start()  # no fallback
        fast, slow = _both(t)
        assert fast == slow
    assert _both(text)[0] == text
