"""Matrix multiplication kernels (tests/kernels/nki_style/matmul.py) against ``lhsT.T @ rhs`` in float64.

fp32 tolerance: products accumulate in fp32 PSUM over K terms of size ~1, so the error grows like
sqrt(K) * 2^-24 * |terms|; rtol 1e-4 / atol 1e-3 covers K <= 1024 with margin. bf16: inputs are bf16 (exact
products in fp32), the sum is fp32 and the result is rounded once to bf16 (2^-9 relative); atol covers entries
that nearly cancel.
"""

import numpy as np
import pytest

from tests.kernels import formulas as ref
from tests.kernels.nki_style import matmul

FP32_TOL = (1e-4, 1e-3)

BLOCKED = [matmul.nki_matmul_tiled_, matmul.nki_matmul_hoist_load_, matmul.nki_matmul_block_free_dimension_,
           matmul.nki_matmul_fully_optimized_, matmul.nki_matmul_fully_optimized_isa]  # fmt: skip


def _operands(k, m, n, dtype=ref.F32, seed=0):
    rng = np.random.default_rng(seed)
    return ref.randn(rng, (k, m), dtype), ref.randn(rng, (k, n), dtype)


def test_basic_single_tile():
    lhsT, rhs = _operands(128, 64, 512)
    ref.assert_close(matmul.nki_matmul_basic_(lhsT, rhs), ref.f64(lhsT).T @ ref.f64(rhs), *FP32_TOL)


@pytest.mark.parametrize("kernel", BLOCKED, ids=lambda k: k.__name__)
def test_tiled_and_blocked(kernel):
    # M = 2 blocks of 2x128, N = 1 block of 2x512, K = 2 blocks of 2x128: every loop level runs more than once
    # except the N blocks, which test_fully_optimized_block_shapes varies.
    lhsT, rhs = _operands(512, 512, 1024)
    ref.assert_close(kernel(lhsT, rhs), ref.f64(lhsT).T @ ref.f64(rhs), *FP32_TOL)


@pytest.mark.parametrize("blocks", [(1, 1, 1), (2, 1, 4), (1, 2, 2)])
def test_fully_optimized_block_shapes(blocks):
    bm, bn, bk = blocks
    lhsT, rhs = _operands(512, 256, 1024, seed=sum(blocks))
    out = matmul.nki_matmul_fully_optimized_(lhsT, rhs, TILES_IN_BLOCK_M=bm, TILES_IN_BLOCK_N=bn,
                                             TILES_IN_BLOCK_K=bk)  # fmt: skip
    ref.assert_close(out, ref.f64(lhsT).T @ ref.f64(rhs), *FP32_TOL)


# The fully optimised kernel keeps its K-block partial sums in an SBUF tile of the input dtype, as the tutorial
# does: with 2 K blocks, two bf16 roundings of partial sums (|partial| <~ 4 sigma = 90, half an ulp = 0.25 each).
BF16_TOL = {"nki_matmul_tiled_": (2.0**-8, 0.1), "nki_matmul_fully_optimized_": (2.0**-7, 0.5)}


@pytest.mark.parametrize("kernel", [matmul.nki_matmul_tiled_, matmul.nki_matmul_fully_optimized_isa],
                         ids=lambda k: k.__name__)  # fmt: skip
def test_bf16_inputs(kernel):
    lhsT, rhs = _operands(512, 256, 1024, ref.LOW_PRECISION["bf16"], seed=3)
    out = kernel(lhsT, rhs)
    assert out.dtype == lhsT.dtype
    ref.assert_close(out, ref.f64(lhsT).T @ ref.f64(rhs), *BF16_TOL[kernel.__name__])


@pytest.mark.parametrize("kmn", [(300, 200, 700), (1, 1, 1), (129, 128, 513)])
def test_ragged_masks(kmn):
    lhsT, rhs = _operands(*kmn, seed=kmn[0])
    ref.assert_close(matmul.nki_matmul_ragged(lhsT, rhs), ref.f64(lhsT).T @ ref.f64(rhs), *FP32_TOL)


def test_without_transpose_x():
    x, y = _operands(256, 512, 512, seed=4)
    x = np.ascontiguousarray(x.T)  # [M, K]: nl.matmul transposes it on the Tensor engine
    ref.assert_close(matmul.nki_matmul_no_transpose(x, y), ref.f64(x) @ ref.f64(y), *FP32_TOL)
