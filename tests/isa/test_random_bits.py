"""``nisa.rng``, ``nisa.rand2``, ``nisa.set_rng_seed`` (reference/nki.md §2.7 "Random"): random words truncated
to the integer dtype's low bits, uniform draws in [min, max], reproducible for a seed, on each backend (conftest;
the backends draw different streams, so the checks are of ranges, distributions and determinism)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent


@nki.jit
def bits(seed, dtype, engine):
    out = nl.ndarray((128, 512), dtype=dtype, buffer=nl.shared_hbm)
    s = nl.load(seed)
    nisa.set_rng_seed(s)
    nl.store(out, nisa.rng((128, 512), dtype, engine=engine))
    return out


def _seed(v):
    return np.array([[v]], dtype=np.uint32)


@pytest.mark.parametrize("engine", ["vector", "gpsimd"])
def test_rng_fills_uint8_with_uniform_bytes(engine):
    x = bits(_seed(3), "uint8", engine)
    assert x.dtype == np.uint8 and len(np.unique(x)) == 256
    assert abs(x.mean() - 127.5) < 2.0  # 65536 draws: the mean's standard error is 0.29
    counts = np.bincount(x.ravel(), minlength=256)
    assert counts.min() > 150 and counts.max() < 370  # 256 expected per value


def test_rng_truncates_to_signed_and_wide_dtypes():
    i8, i32 = bits(_seed(5), "int8", "vector"), bits(_seed(5), "int32", "vector")
    assert i8.min() == -128 and i8.max() == 127 and abs(i8.mean()) < 2.0
    assert i32.min() < -(2**30) and i32.max() > 2**30  # all 32 bits random


def test_the_seed_decides_the_stream():
    a, b, c = (bits(_seed(v), "uint32", "vector") for v in (7, 7, 8))
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.99


@nki.jit
def uniform(lo, hi):
    out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.rand2((128, 1024), nl.load(lo), nl.load(hi)))
    return out


def test_rand2_draws_within_per_partition_bounds_on_trn3():
    lo = np.arange(128, dtype=np.float32).reshape(128, 1)
    hi = lo + 2.0
    x = uniform(lo, hi, target="trn3")
    assert (x >= lo).all() and (x <= hi).all()
    np.testing.assert_allclose(x.mean(axis=1), lo[:, 0] + 1.0, atol=0.1)  # 1024 draws of variance 1/3 per row


@backend_independent
def test_rand2_is_trn3_only_and_rng_writes_integers():
    lo = np.zeros((128, 1), np.float32)
    with pytest.raises(nki.NkiError, match=r"nisa.rand2 runs on NeuronCore-v4 \(trn3\) only"):
        uniform(lo, lo + 1)
    with pytest.raises(nki.NkiError, match="rng writes integer tiles"):
        bits(_seed(1), "float32", "vector")


@nki.jit
def tiles_of_bits(seed):
    """Four tiles of random words drawn in a loop whose iterations are otherwise independent."""
    out = nl.ndarray((4, 128, 64), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.set_rng_seed(nl.load(seed))
    for t in nl.affine_range(4):
        nl.store(out[t], nisa.rng((128, 64), "uint32", engine="vector"))
    return out


def test_each_iteration_of_a_loop_draws_its_own_words():
    # the generator's state is carried from one iteration to the next: a backend batching the loop's iterations
    # (the JAX one's vectorise) must not, or every tile would repeat the first one's draws
    x = tiles_of_bits(_seed(9))
    for a in range(4):
        for b in range(a):
            assert (x[a] != x[b]).mean() > 0.99, (a, b)
