"""nki.simulate and nki.benchmark: outputs equal the NumPy reference, timing from shapes alone, one simulator
run per (specialisation, target), and @nki.benchmark / @nki.profile still the NKI decorators."""

import numpy as np
import pytest

import nki_dsl as nki
from kernels.matmul import matmul_tiled as matmul
from tests.profiling.kernels import add

RNG = np.random.default_rng(3)
LHST = RNG.standard_normal((256, 256)).astype(np.float32)
RHS = RNG.standard_normal((256, 1024)).astype(np.float32)


def test_simulate_returns_the_reference_outputs_and_a_profile():
    out, prof = nki.simulate(matmul, LHST, RHS, target="trn2")
    np.testing.assert_array_equal(out, matmul(LHST, RHS))  # bit-identical to the NumPy reference
    assert prof.target.name == "trn2" and prof.latency_us > 0
    assert set(prof.engine_busy) >= {"tensor", "vector", "scalar", "gpsimd", "dma"}
    assert 0 < prof.tensor_engine_utilisation < 1
    # 2 M-tiles x 2 N-tiles x 2 K-tiles of 128 x 128 x 512 multiply-adds on the Tensor engine
    assert prof.tensor_flops == 8 * 2 * 128 * 128 * 512


def test_a_second_call_reuses_the_profile_and_recomputes_the_outputs():
    _, first = nki.simulate(matmul, LHST, RHS)
    out, again = nki.simulate(matmul, 2 * LHST, RHS)  # same specs, new values
    assert again is first
    np.testing.assert_array_equal(out, matmul(2 * LHST, RHS))
    _, other = nki.simulate(matmul, LHST, RHS, target="trn1")
    assert other is not first and other.target.name == "trn1"
    assert other.latency_us != first.latency_us


def test_simulate_takes_a_launch_grid_and_keyword_arguments():
    a, b = RNG.standard_normal((512, 256)).astype(np.float32), RNG.standard_normal((512, 256)).astype(np.float32)
    out, prof = nki.simulate(add[2], a=a, b=b)
    np.testing.assert_array_equal(out, a + b)
    _, one = nki.simulate(add[1], a, b)
    assert prof is not one  # the grid is part of the key


def test_simulate_needs_arrays_and_points_to_benchmark():
    with pytest.raises(nki.NkiApiError, match="use nki.benchmark"):
        nki.simulate(matmul, nki.spec((256, 256), "float32"), RHS)


def test_benchmark_is_timing_only_and_shares_the_cache_with_simulate():
    prof = nki.benchmark(matmul, nki.spec(LHST.shape, "float32"), nki.spec(RHS.shape, "float32"))
    assert prof is nki.simulate(matmul, LHST, RHS)[1]
    assert nki.benchmark(matmul, LHST, rhs=RHS) is prof  # arrays are reduced to their specs


def test_benchmark_of_shapes_too_large_to_compute():
    # 2 x 4 GiB of fp32 inputs: timing only never allocates them.
    rows, cols = 262144, 4096
    prof = nki.benchmark(add, nki.spec((rows, cols), "float32"), nki.spec((rows, cols), "float32"), target="trn1")
    assert prof.instructions == 4 * rows // 128  # two loads, the add and a store per row tile
    assert prof.hbm_bytes == 3 * rows * cols * 4
    assert prof.bottleneck == "dma"


def test_bf16_matmul_is_faster_than_fp32():
    fp32 = nki.benchmark(matmul, nki.spec((1024, 512), "float32"), nki.spec((1024, 2048), "float32"))
    bf16 = nki.benchmark(matmul, nki.spec((1024, 512), "bfloat16"), nki.spec((1024, 2048), "bfloat16"))
    assert bf16.latency_us < fp32.latency_us


def _double(x):
    import nki_dsl.language as nl

    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x) * 2.0)
    return out


@pytest.mark.parametrize("decorator", [nki.benchmark, nki.profile])
def test_the_nki_decorators_keep_working(decorator):
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    for kernel in (decorator(_double), decorator(warmup=2, iters=3)(_double), decorator()(_double)):
        np.testing.assert_array_equal(kernel(x), 2 * x)


def test_benchmark_of_a_plain_function_asks_for_jit():
    with pytest.raises(nki.NkiApiError, match="decorate it with @nki.jit"):
        nki.benchmark(_double, nki.spec((128, 64), "float32"))


def test_the_profile_cache_is_the_simulators_and_dies_with_its_kernel():
    import gc

    from nki_dsl import profiling

    kernel = nki.jit(_double)
    nki.benchmark(kernel, nki.spec((128, 64), "float32"))
    assert kernel in profiling._PROFILES and not hasattr(kernel, "_profiles")  # not kept by JitKernel itself
    count = len(profiling._PROFILES)
    del kernel
    gc.collect()
    assert len(profiling._PROFILES) == count - 1
