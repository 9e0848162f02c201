"""Vector-engine selection: tensor_copy_predicated (the instruction nl.where lowers to) and dropout, against
NumPy formulas."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import BF16, F32, assert_close, f32, rand, run_tiles

P, F = 128, 96


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.dtype(F32), BF16])
def test_tensor_copy_predicated_writes_only_where_the_predicate_selects(reverse, dtype):
    dst, src = rand((P, F), dtype, seed=1), rand((P, F), F32, seed=2)
    pred = (rand((P, F), seed=3) > 0).astype(F32)
    pred[:, 0] = np.nan  # NaN is nonzero: it selects

    def body(d, s, p):
        nisa.tensor_copy_predicated(src=s, dst=d, predicate=p, reverse_pred=reverse)
        return d

    chosen = (pred != 0) != reverse
    assert_close(run_tiles(body, dst, src, pred), np.where(chosen, f32(src), f32(dst)), dtype, rtol=0, atol=0)


def test_tensor_copy_predicated_under_a_mask_leaves_the_other_partitions():
    dst, src, pred = rand((P, F), seed=4), rand((P, F), seed=5), np.ones((P, F), F32)

    def body(d, s, p):
        i_p = nl.arange(P)[:, None]
        nisa.tensor_copy_predicated(src=s, dst=d, predicate=p, mask=(i_p < 40))
        return d

    expected = f32(dst).copy()
    expected[:40] = src[:40]
    assert_close(run_tiles(body, dst, src, pred), expected, rtol=0, atol=0)


@backend_independent
def test_tensor_copy_predicated_rejects_operands_of_another_shape():
    with pytest.raises(nki.NkiTraceError, match=r"nisa.tensor_copy_predicated.*'src' \[128, 48\]"):
        run_tiles(lambda d, s, p: nisa.tensor_copy_predicated(src=s, dst=d, predicate=p) or d,
                  rand((P, F)), rand((P, 48)), rand((P, F)))  # fmt: skip


@nki.jit
def _dropout(x, prob, seed):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.random_seed(seed)
    nl.store(out, nisa.dropout(nl.load(x), prob if isinstance(prob, float) else nl.load(prob)))
    return out


@pytest.mark.parametrize("dtype", [np.dtype(F32), BF16])
def test_dropout_keeps_or_zeroes_each_element_with_the_given_probability(dtype):
    x = rand((P, 512), dtype, 0.5, 2.0, seed=6)  # nonzero, so a zero means dropped
    got = _dropout(x, 0.3, 5)
    kept = f32(got) != 0
    np.testing.assert_array_equal(f32(got)[kept], f32(x)[kept])
    assert abs(1 - kept.mean() - 0.3) < 0.02
    np.testing.assert_array_equal(f32(_dropout(x, 0.3, 5)), f32(got))  # deterministic for a seed


def test_dropout_with_a_probability_per_partition():
    x = rand((P, 512), F32, 0.5, 2.0, seed=7)
    prob = np.where(np.arange(P) < 64, 0.0, 1.0).astype(F32).reshape(P, 1)
    got = _dropout(x, prob, 1)
    np.testing.assert_array_equal(got[:64], x[:64])  # probability 0: all kept
    assert not got[64:].any()  # probability 1: all dropped


def test_dropout_is_the_draw_nl_dropout_makes():
    @nki.jit
    def both(x):
        outs = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm) for _ in range(2)]
        nl.random_seed(3)
        nl.store(outs[0], nisa.dropout(nl.load(x), 0.5))
        nl.random_seed(3)
        nl.store(outs[1], nl.dropout(nl.load(x), 0.5))
        return tuple(outs)

    a, b = both(rand((P, 64), seed=8))
    np.testing.assert_array_equal(a, b)
