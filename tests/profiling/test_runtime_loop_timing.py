"""The simulator's profile cache (nki_dsl/profiling.py) and runtime loops: a timing-only run (nki.benchmark, every
runtime loop at its declared bound) is cached per shapes, but a run with data times the trip count its register
holds, whatever was timed before. Found when a mutation run re-ran the suite in one process: after the timing test
of tests/current_api/test_runtime_loops.py had benchmarked its kernel once, every later simulate of it answered
the bound."""

import numpy as np

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl

X = np.ones((128, 512), np.float32)


def reg(n: int) -> np.ndarray:
    return np.array([[n]], np.int32)


@nki.jit
def copy_prefix(x, n):
    """The first n 128-column tiles of x, through SBUF; n (HBM, int32) read into a register."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.dynamic_range(count):
        t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
        nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)
    return out


def test_a_benchmark_does_not_fix_the_timing_of_later_runs_with_data():
    bound = nki_dsl.benchmark(copy_prefix, X, reg(0)).latency_ns  # shapes alone: the declared bound, 4 tiles
    times = [nki.simulate(copy_prefix, X, reg(n))[1].latency_ns for n in (1, 2, 4)]
    assert times == sorted(times) and len(set(times)) == 3
    assert times[0] < bound and times[-1] == bound
    assert nki_dsl.benchmark(copy_prefix, X, reg(1)).latency_ns == bound  # and the benchmark still times the bound


def test_runs_with_data_are_not_cached_as_the_timing_of_those_shapes():
    one = nki.simulate(copy_prefix, X, reg(1))[1].latency_ns
    assert nki.simulate(copy_prefix, X, reg(3))[1].latency_ns > one
    assert nki.simulate(copy_prefix, X, reg(1))[1].latency_ns == one
