"""Loops stay symbolic: the traced IR of a loop does not grow with its trip count, and neither does tracing."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.nodes import Loop, Op


def _row_sum_kernel(trips, loop):
    @nki.jit
    def row_sums(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in loop(trips):
            acc[...] += nl.load(a[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
        nl.store(out, value=acc)
        return out

    return row_sums


def _shape_of(kernel):
    return [(type(s).__name__, s.name if isinstance(s, Op) else s.kind) for s, _ in kernel.walk()]


def test_a_million_iterations_trace_to_the_same_ir_as_ten():
    small = nki.trace(_row_sum_kernel(10, nl.affine_range), nki.spec((1280, 512), np.float32)).ir
    huge = nki.trace(_row_sum_kernel(1_000_000, nl.affine_range), nki.spec((128_000_000, 512), np.float32)).ir
    assert _shape_of(small) == _shape_of(huge)
    loops = [s for s, _ in huge.walk() if isinstance(s, Loop)]
    assert [(lp.kind, lp.trip_count) for lp in loops] == [("affine", 1_000_000)]


def test_sequential_loops_are_symbolic_and_static_range_unrolls():
    seq = nki.trace(_row_sum_kernel(1000, nl.sequential_range), nki.spec((128_000, 512), np.float32)).ir
    assert [s.kind for s, _ in seq.walk() if isinstance(s, Loop)] == ["sequential"]
    unrolled = nki.trace(_row_sum_kernel(3, nl.static_range), nki.spec((384, 512), np.float32)).ir
    assert not [s for s, _ in unrolled.walk() if isinstance(s, Loop)]
    assert [s.name for s, _ in unrolled.walk() if isinstance(s, Op)].count("nl.load") == 3


def test_loop_runs_every_iteration():
    a = np.random.default_rng(0).standard_normal((128 * 7, 512)).astype(np.float32)
    for loop in (nl.affine_range, nl.sequential_range, nl.static_range, range):
        got = _row_sum_kernel(7, loop)(a)
        np.testing.assert_allclose(got, a.reshape(7, 128, 512).sum(axis=0), rtol=1e-5, atol=1e-5)
