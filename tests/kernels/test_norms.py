"""RMSNorm and LayerNorm kernels against their NumPy formulas, on row counts with a masked last tile.

fp32: a handful of fp32 roundings per element (mean, rsqrt, two multiplies): rtol/atol 1e-5. bf16 inputs: the
tutorial kernels round intermediate tiles (squares, sums, normalised rows) to the input dtype; each rounding is
2^-9 relative and outputs are O(1..4), so rtol 3e-2 with atol 3e-2 bounds a few of them.
"""

import numpy as np
import pytest

from kernels.rmsnorm.kernel import rmsnorm_kernel
from tests.kernels import formulas as ref
from tests.kernels.nki_style import layernorm, rmsnorm

FP32_TOL = (1e-5, 1e-5)
BF16_TOL = (3e-2, 3e-2)
RMS = [rmsnorm.nki_rmsnorm_kernel, rmsnorm_kernel, rmsnorm.nki_rmsnorm_isa]  # rmsnorm_kernel: nl.rms_norm
LN = [layernorm.nki_layernorm_kernel_v1, layernorm.nki_layernorm_kernel_var, layernorm.nki_layernorm_kernel_v2]
EPS = {"nki_rmsnorm_kernel": 0.0, "rmsnorm_kernel": 1e-6, "nki_rmsnorm_isa": 0.0}


def _rms_inputs(rows, cols, dtype=ref.F32):
    rng = np.random.default_rng(rows + cols)
    return ref.randn(rng, (rows, cols), dtype), ref.randn(rng, (cols,), dtype)


def _ln_inputs(rows, cols, dtype=ref.F32):
    rng = np.random.default_rng(rows * cols)
    # A per-row offset makes E[x^2] - E[x]^2 (kernel v1) lose digits, as it does in the tutorial.
    x = (ref.randn(rng, (rows, cols)) + rng.uniform(-2, 2, (rows, 1))).astype(dtype)
    return x, ref.randn(rng, (cols,), dtype), ref.randn(rng, (cols,), dtype)


@pytest.mark.parametrize("kernel", RMS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("rows", [128, 250])
def test_rmsnorm_fp32(kernel, rows):
    a, g = _rms_inputs(rows, 384)
    ref.assert_close(kernel(a, g), ref.rmsnorm(a, g, EPS[kernel.__name__]), *FP32_TOL)


@pytest.mark.parametrize("kernel", RMS, ids=lambda k: k.__name__)
def test_rmsnorm_bf16(kernel):
    a, g = _rms_inputs(200, 256, ref.LOW_PRECISION["bf16"])
    out = kernel(a, g)
    assert out.dtype == a.dtype
    ref.assert_close(out, ref.rmsnorm(a, g, EPS[kernel.__name__]), *BF16_TOL)


@pytest.mark.parametrize("kernel", LN, ids=lambda k: k.__name__)
@pytest.mark.parametrize("shape", [(128, 512), (300, 1024)])  # v2: one bn_stats chunk, then two
def test_layernorm_fp32(kernel, shape):
    x, gamma, beta = _ln_inputs(*shape)
    # v1 computes var = E[x^2] - E[x]^2: cancellation with |mean| <= 2 costs about 4x the fp32 error.
    tol = (1e-4, 1e-4) if kernel is layernorm.nki_layernorm_kernel_v1 else FP32_TOL
    ref.assert_close(kernel(x, 1e-5, gamma, beta), ref.layernorm(x, gamma, beta, 1e-5), *tol)


@pytest.mark.parametrize("kernel", LN, ids=lambda k: k.__name__)
def test_layernorm_bf16(kernel):
    x, gamma, beta = _ln_inputs(130, 512, ref.LOW_PRECISION["bf16"])
    out = kernel(x, 1e-5, gamma, beta)
    assert out.dtype == x.dtype
    ref.assert_close(out, ref.layernorm(x, gamma, beta, 1e-5), *BF16_TOL)
