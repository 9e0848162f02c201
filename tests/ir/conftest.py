import pytest

from .support import EVERY_KIND, extra_ops


@pytest.fixture(scope="module")
def every_kind_op():
    """Registers the test-only ``test.every_kind`` op in the op table for the requesting module."""
    with extra_ops(EVERY_KIND):
        yield EVERY_KIND
