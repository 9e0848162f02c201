"""``nl.dropout`` and ``nl.random_seed``: deterministic for a seed, identity at rate 0, kept elements unchanged,
and the dropped fraction close to the rate."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F32, rand


@nki.jit
def dropout_kernel(x, rate, seed):
    nl.random_seed(seed)
    result = nl.dropout(nl.load(x), rate)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_rate_zero_is_identity(dtype):
    x = rand((128, 256), dtype, 0.5, 2, seed=1)
    np.testing.assert_array_equal(dropout_kernel(x, 0.0, 7), x)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_dropped_fraction_and_kept_values(rate):
    x = rand((128, 512), F32, 0.5, 2, seed=2)  # no zeros in the input: a zero in the output was dropped
    got = dropout_kernel(x, rate, 3)
    dropped = got == 0
    # 65536 Bernoulli draws: the fraction's standard deviation is below 0.002; 0.02 is ten of them.
    assert abs(dropped.mean() - rate) < 0.02
    np.testing.assert_array_equal(got[~dropped], x[~dropped])


def test_same_seed_same_mask_other_seed_other_mask():
    x = rand((128, 256), F32, 0.5, 2, seed=4)
    a, b, c = dropout_kernel(x, 0.5, 11), dropout_kernel(x, 0.5, 11), dropout_kernel(x, 0.5, 12)
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.3


@nki.jit
def two_dropouts_kernel(x):
    """Two draws after one seed differ (the generator advances); re-seeding repeats the first draw."""
    t = nl.load(x)
    outs = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm) for _ in range(3)]
    nl.random_seed(5)
    nl.store(outs[0], value=nl.dropout(t, 0.5))
    nl.store(outs[1], value=nl.dropout(t, 0.5))
    nl.random_seed(5)
    nl.store(outs[2], value=nl.dropout(t, 0.5))
    return tuple(outs)


def test_generator_advances_and_reseeds():
    first, second, reseeded = two_dropouts_kernel(rand((128, 256), F32, 0.5, 2, seed=5))
    assert (first != second).mean() > 0.3
    np.testing.assert_array_equal(first, reseeded)
