"""``chunks.sizes`` over every small range, step and block a manifest and an IR can give (hostile ones included: a
range starting far above 1, a step and a block sharing no factor, a block past the range's top): each cut is
sound (the parts sum to the call's size, each in the range and a multiple of the step, every one but the last a
multiple of the block, so every slice starts at a multiple of it) and it is refused, with a ``ValueError`` the
loader words as a ``NoSpecialisationError``, only when no such cut exists (found here by brute force)."""

import itertools

import pytest

from hub_client import chunks


def _cut_exists(n: int, lo: int, hi: int, step: int, block: int) -> bool:
    """Whether ``n`` is a sum of parts in ``lo..hi``, multiples of ``step``, all but the last multiples of ``block``."""
    reach = [False] * (n + 1)  # reach[s]: s rows cut into whole parts that may be followed by another
    reach[0] = True
    for s in range(n + 1):
        if reach[s]:
            for p in range(lo, min(hi, n - s) + 1):
                reach[s + p] = reach[s + p] or (p % step == 0 and p % block == 0)
    return any(reach[s] and lo <= n - s <= hi and (n - s) % step == 0 for s in range(n))


CASES = [(n, lo, hi, step, block)
         for step, block in itertools.product((1, 2, 3, 4), (1, 2, 3, 4, 5, 8, 32))
         for lo in range(step, 13, step) for hi in range(lo, 25, step)
         for n in range(hi + step, 49, step)]  # fmt: skip


def test_every_cut_is_sound_and_a_refusal_means_no_cut_exists():
    refused = 0
    for n, lo, hi, step, block in CASES:
        try:
            parts = chunks.sizes(n, lo, hi, step, block)
        except ValueError as e:
            assert not _cut_exists(n, lo, hi, step, block), (n, lo, hi, step, block, str(e))
            assert f"in {lo}..{hi}" in str(e)
            refused += 1
            continue
        assert sum(parts) == n, (n, lo, hi, step, block, parts)
        assert all(lo <= p <= hi and p % step == 0 for p in parts), (n, lo, hi, step, block, parts)
        assert all(p % block == 0 for p in parts[:-1]), (n, lo, hi, step, block, parts)
    assert 0 < refused < len(CASES)  # (both answers are exercised)


@pytest.mark.parametrize("args, parts", [
    ((9, 3, 4, 1, 1), [3, 3, 3]),  # the rest borrows from two parts (was refused: one part could not give 2)
    ((5, 2, 3, 1, 2), [2, 3]),  # the last part, not a multiple of the block, joins the one before it
    ((70000, 1, 65536, 1, 128), [65536, 4464]),  # a range from 1 never borrows
])  # fmt: skip
def test_a_rest_below_the_range_borrows_from_several_parts_or_joins_the_last(args, parts):
    assert chunks.sizes(*args) == parts


def test_a_block_past_the_top_of_the_range_is_refused():
    with pytest.raises(ValueError, match="no part in 1..100 is a multiple of 128"):
        chunks.sizes(300, 1, 100, 1, 128)
