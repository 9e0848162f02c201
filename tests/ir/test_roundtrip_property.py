"""The round-trip property on random kernels drawn from the op table, plus the test-only every-kind op."""

import pytest
from hypothesis import given, settings

from nki_dsl.ir.ops import OPS
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from tests.examples import examples

from .strategies import kernels
from .support import EVERY_KIND, structure, unlinked_tensors


@pytest.mark.usefixtures("every_kind_op")
@settings(max_examples=examples(200), deadline=None)
@given(kernels({**OPS, EVERY_KIND.name: EVERY_KIND}))
def test_print_parse_print_is_the_identity(kernel):
    text = print_kernel(kernel)
    parsed = parse_kernel(text)
    assert print_kernel(parsed) == text
    assert structure(parsed) == structure(kernel)
    assert unlinked_tensors(parsed) == []
