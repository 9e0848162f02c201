"""Fixed placements at the edges of the allocator's overlap check: ranges that touch but do not share a partition
or a byte are both allowed live at once, and one shared partition or byte is an overlap."""

import numpy as np
import pytest

import nki_dsl.current as nki
from nki_dsl.errors import NkiVerificationError
from tests.current_api.test_address import X, _kernel


@pytest.mark.parametrize("a_addr, b_addr", [((0, 4096), (64, 4096)), ((64, 4096), (0, 4096))])
def test_tensors_on_adjacent_partition_ranges_may_use_the_same_bytes(a_addr, b_addr):
    k = _kernel(a_addr, b_addr, parts=64)  # a on partitions 0..63 and b on 64..127 (or the other way round)
    out, _ = nki.simulate(k, X[:64], target="trn2")
    np.testing.assert_allclose(out, X[:64] + np.exp(X[:64]), rtol=1e-6)


@pytest.mark.parametrize("a_addr, b_addr", [((0, 4096), (0, 5120)), ((0, 5120), (0, 4096))])
def test_tensors_whose_bytes_only_touch_are_both_placed(a_addr, b_addr):
    k = _kernel(a_addr, b_addr)  # a [128, 256] fp32 takes bytes 4096..5119 of each partition; b starts at 5120
    out, _ = nki.simulate(k, X, target="trn2")
    np.testing.assert_allclose(out, X + np.exp(X), rtol=1e-6)


@pytest.mark.parametrize("a_addr, b_addr", [((0, 4096), (0, 5116)), ((0, 5116), (0, 4096))])
def test_one_shared_word_of_two_live_tensors_is_an_overlap(a_addr, b_addr):
    k = _kernel(a_addr, b_addr)
    with pytest.raises(NkiVerificationError, match=r"placement of %\w+: overlaps %\w+ .*while both are live"):
        nki.simulate(k, X, target="trn2")
