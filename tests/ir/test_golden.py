"""Golden IR files: hand-written kernels in canonical layout; parsing then printing must reproduce each byte."""

from pathlib import Path

import pytest

from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel

from .support import unlinked_tensors

GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.nkir"))


def test_golden_files_exist():
    assert len(GOLDEN) >= 3


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_file_round_trips_byte_for_byte(path):
    text = path.read_text(encoding="utf-8")
    kernel = parse_kernel(text, path.name)
    assert print_kernel(kernel) == text
    assert unlinked_tensors(kernel) == []
