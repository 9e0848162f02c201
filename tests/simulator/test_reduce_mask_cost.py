"""A reduction whose mask constrains the reduced axis (its ``reduce_mask``) reads only the box the mask keeps of
its input (reference/nki.md §1.3: a mask makes the instruction's tile smaller), so it is priced as the same
reduction over that box: a row-length family's max and sum over a tile sized for 8192 columns but masked to 512
cost what they cost over a 512-column tile (kernels/softmax/widths.py relies on it)."""

from __future__ import annotations

import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.simulator import profile
from nki_dsl.targets import get_target
from tests.simulator.test_speed_invariance import _ir

TRN2 = get_target("trn2")


@nki.jit
def row_sums(a, width, cols):
    """Per-row sum (or max) of the first ``cols`` of ``width`` columns, 8 times over."""
    out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(width)[None, :]
    t = nl.load(a[i_p, i_f])
    acc = nl.zeros((128, 1), nl.float32)
    for _ in nl.sequential_range(8):
        acc[...] = nl.add(acc, nl.sum(t, axis=[1], keepdims=True, mask=(i_f < cols)))
    nl.store(out, value=acc)
    return out


def _vector_ns(width, cols):
    p = profile(_ir(row_sums, (nki.spec((128, width), "float32"), width, cols), "trn2"), TRN2)
    return p.unit_busy_ns["vector"]


@pytest.mark.parametrize("cols", [512, 1000])
def test_a_masked_reduction_costs_what_the_kept_box_costs(cols):
    assert _vector_ns(8192, cols) == pytest.approx(_vector_ns(cols, cols), rel=1e-9)
    assert _vector_ns(8192, cols) < _vector_ns(8192, 8192) / 4
