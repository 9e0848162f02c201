"""The current API's random instructions in destination-passing form (reference/nki.md §2.7 "Random"), on the
NumPy reference and the simulator: ``set_rng_seed`` then ``rng`` into an integer ``dst`` and ``rand2`` into a
bf16 ``dst`` on trn3."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl


@nki.jit
def draws(seed):
    words = nl.ndarray((128, 256), nl.uint16, buffer=nl.shared_hbm)
    unif = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=seed)
    nisa.set_rng_seed(src_seeds=s)
    w = nl.ndarray((128, 256), nl.uint16, buffer=nl.sbuf)
    nisa.rng(dst=w, engine=nisa.engine.gpsimd)
    u = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
    nisa.rand2(dst=u, min=-1.0, max=3.0)
    nisa.dma_copy(dst=words, src=w)
    nisa.dma_copy(dst=unif, src=u)
    return words, unif


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_rng_and_rand2_write_their_destinations(backend, monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    seed = np.array([[42]], np.uint32)
    run = nki.simulate(draws) if backend == "simulator" else draws
    (w1, u1), (w2, u2) = run(seed), run(seed)
    np.testing.assert_array_equal(w1, w2)  # same seed, same draws
    np.testing.assert_array_equal(u1, u2)
    assert w1.dtype == np.uint16 and w1.max() > 60000 and abs(w1.mean() / 65535 - 0.5) < 0.01
    u = u1.astype(np.float32)
    assert u.min() >= -1.0 and u.max() <= 3.0 and abs(u.mean() - 1.0) < 0.02
