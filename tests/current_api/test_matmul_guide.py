"""Conformance: the matmul guide's five kernels in the current API against a float64 NumPy formula, on the NumPy
reference and the engine simulator, and against their legacy twins (same numbers)."""

import numpy as np
import pytest

import nki_dsl
from tests.current_api.matmul_guide import CURRENT, LEGACY

SHAPES = {  # (K, M, N): several tiles along every loop, small enough for a quick run
    "basic": (128, 64, 512),
    "tiled": (256, 256, 1024),
    "hoisted": (256, 256, 1024),
    "block_free": (256, 256, 1024),
    "fully_blocked": (512, 256, 1024),
}
# Block sizes (in tiles) for the blocked kernels: several blocks along M and K, the SBUF accumulation over K
OPTIONS = {"block_free": dict(TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=1),
           "fully_blocked": dict(TILES_IN_BLOCK_M=1, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=2)}  # fmt: skip


def _inputs(name, dtype=np.float32):
    K, M, N = SHAPES[name]
    rng = np.random.default_rng(len(name))
    return rng.uniform(-1, 1, (K, M)).astype(dtype), rng.uniform(-1, 1, (K, N)).astype(dtype)


def _expected(lhsT, rhs):
    return lhsT.astype(np.float64).T @ rhs.astype(np.float64)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
@pytest.mark.parametrize("name", list(CURRENT))
def test_guide_kernel_matches_float64(name, backend):
    lhsT, rhs = _inputs(name)
    kw = OPTIONS.get(name, {})
    out = CURRENT[name](lhsT, rhs, **kw) if backend == "numpy" else _simulated(CURRENT[name], lhsT, rhs, **kw)
    assert out.shape == (lhsT.shape[1], rhs.shape[1]) and out.dtype == np.float32
    # fp32 products summed in fp32 over K: a few ulps of the largest partial sum
    np.testing.assert_allclose(out, _expected(lhsT, rhs), rtol=1e-5, atol=1e-5 * np.sqrt(lhsT.shape[0]))


def _simulated(kernel, *args, **kwargs):
    import nki_dsl.current as nki

    sim = nki.simulate(kernel)
    out = sim(*args, **kwargs)
    assert sim.profile is not None and sim.profile.latency_us > 0
    return out


@pytest.mark.parametrize("name", list(LEGACY))
def test_legacy_twin_gives_the_same_numbers(name):
    lhsT, rhs = _inputs(name)
    np.testing.assert_array_equal(CURRENT[name](lhsT, rhs), LEGACY[name](lhsT, rhs))


@pytest.mark.parametrize("name", ["block_free", "fully_blocked"])
def test_blocked_kernels_equal_the_tiled_legacy_kernel(name):
    """Blocking changes which tiles are loaded when, not the sums: with one K block per PSUM group the fp32
    partial sums are added in the same order as the tiled kernel's (fully blocked: per K block, then in SBUF)."""
    lhsT, rhs = _inputs(name)
    expected = LEGACY["tiled"](lhsT, rhs)
    got = CURRENT[name](lhsT, rhs, **OPTIONS[name])
    if name == "block_free":
        np.testing.assert_array_equal(got, expected)
    else:  # (k0 + k1) + (k2 + k3) vs ((k0 + k1) + k2) + k3: fp32 reassociation only
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_bfloat16_inputs_and_output():
    import ml_dtypes

    lhsT, rhs = _inputs("tiled", ml_dtypes.bfloat16)
    out = CURRENT["tiled"](lhsT, rhs)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(out.astype(np.float32), _expected(lhsT, rhs), rtol=2**-7, atol=2**-7 * 16)
    np.testing.assert_array_equal(out, LEGACY["tiled"](lhsT, rhs))


def test_simulated_timing_equals_the_legacy_twin():
    """One IR for both generations: the tiled kernel's modelled latency is the legacy twin's."""
    lhsT, rhs = _inputs("tiled")
    _, current = nki_dsl.simulate(CURRENT["tiled"], lhsT, rhs, target="trn2")
    _, legacy = nki_dsl.simulate(LEGACY["tiled"], lhsT, rhs, target="trn2")
    assert current.latency_us == pytest.approx(legacy.latency_us)
