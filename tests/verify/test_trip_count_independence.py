"""The verifier reasons over a loop nest symbolically: its work does not follow the trip counts (issue 11). Measured
as work, not time (no timed assertions): the integer-set search nodes the exact questions take
(``verify/integer_sets.py``, each node halves a range), counted for the same kernel at a small and at a 4096 times
larger trip count. Enumerating iterations would multiply them by 4096; halving ranges adds a few per doubling.
The answers must not change with the size either."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.passes.verifier import verify_kernel
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import as_launch, bind
from nki_dsl.verify import integer_sets
from tests.kernels.legacy.flash_bwd import flash_attn_bwd

RATIO = 4096


@nki.jit
def ragged_pairs(x):
    """Row tiles visited two at a time, ``(2 * i + g) * 128``, one pair too many; the mask over the pair's loop
    index and the partition axis (``256 * i + 128 + i_p < rows``) switches the extra pair off. It is no multiple of
    the index, so only the exact integer-set question shows the access stays inside."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:cols]
    for i in nl.affine_range(rows // 256 + 1):
        for g in nl.affine_range(2):
            r = (2 * i + g) * 128 + i_p
            ok = i * 256 + 128 + i_p < rows
            nl.store(out[r, i_f], value=nl.multiply(nl.load(x[r, i_f], mask=ok), 2.0), mask=ok)
    return out


@nki.jit
def overrun_pairs(x):
    """The same with the mask on the tile start only: the last tile reads past the end (a true refusal)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:cols]
    for i in nl.affine_range((rows + 255) // 256):
        for g in nl.affine_range(2):
            r = (2 * i + g) * 128 + i_p
            ok = (2 * i + g) * 128 < rows
            nl.store(out[r, i_f], value=nl.multiply(nl.load(x[r, i_f], mask=ok), 2.0), mask=ok)
    return out


def _search_nodes(monkeypatch, kernel, *args) -> tuple[int, list[str]]:
    """(search nodes, the rules of the diagnostics) of verifying ``kernel`` traced for ``args``."""
    nodes = [0]
    feasible = integer_sets._feasible

    def counted(constraints, ranges, budget, work):
        nodes[0] += 1
        return feasible(constraints, ranges, budget, work)

    monkeypatch.setattr(integer_sets, "_feasible", counted)
    launch = as_launch(kernel)
    target = get_target("trn2")
    ir = launch.jit._trace(bind(launch.jit.fn, args, {})[0], launch.grid, target)[0]
    found = verify_kernel(ir, target)
    return nodes[0], sorted({d.rule for d in found})


@pytest.mark.parametrize("kernel, ragged, refused", [(ragged_pairs, 0, []), (overrun_pairs, 64, ["out-of-bounds"])],
                         ids=["accepted", "refused"])  # fmt: skip
def test_search_work_grows_with_the_logarithm_of_the_trip_count(monkeypatch, kernel, ragged, refused):
    small = nki.spec((4 * 256 + ragged, 64), "float32")
    large = nki.spec((4 * 256 * RATIO + ragged, 64), "float32")
    nodes_small, rules_small = _search_nodes(monkeypatch, kernel, small)
    nodes_large, rules_large = _search_nodes(monkeypatch, kernel, large)
    assert rules_small == rules_large == refused
    assert nodes_small > 0  # the exact question is asked, so the comparison below is not vacuous
    assert nodes_large <= nodes_small * np.log2(RATIO)


def test_the_flash_backward_verifies_alike_at_seqlen_512_and_8192(monkeypatch):
    def call(seq):
        q, kv = nki.spec((1, 4, 128, seq), "bfloat16"), nki.spec((1, 2, 128, seq), "bfloat16")
        return q, kv, kv, q, q, nki.spec((1, 4, 128, seq // 128), "float32")

    short = _search_nodes(monkeypatch, flash_attn_bwd[1, 2], *call(512))
    long = _search_nodes(monkeypatch, flash_attn_bwd[1, 2], *call(8192))
    assert short == long and short[1] == []
