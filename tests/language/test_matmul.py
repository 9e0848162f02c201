"""``nl.matmul`` on the NumPy backend: both operand layouts, fp32/bf16/fp16 operands, fp32 results in PSUM,
and accumulation ``acc += nl.matmul(...)`` over an ``affine_range`` (PSUM accumulates in fp32)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand


def _dot_bound(a, b):
    """An fp32 dot product of length K is within K * eps * sum|a_k b_k| of the exact one (any summation order)."""
    k = a.shape[0]
    return float(k * 2.0**-23 * (np.abs(a).T @ np.abs(b)).max())


@nki.jit
def matmul_kernel(x, y, transpose_x):
    result = nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)  # from PSUM, as legacy nl.store allows
    return out


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("transpose_x", [True, False], ids=["xT", "x"])
def test_matmul(transpose_x, dtype):
    k, m, n = 128, 96, 256
    x = rand((k, m) if transpose_x else (m, k), dtype, seed=1)
    y = rand((k, n), dtype, seed=2)
    got = matmul_kernel(x, y, transpose_x)
    lhs_t = exact(x) if transpose_x else exact(x).T  # [K, M]
    # The product of two bf16/fp16 values is exact in fp32; the result is fp32 whatever the operand dtype.
    assert_ulps(got, lhs_t.T @ exact(y), F32, atol=_dot_bound(lhs_t, exact(y)), what="nl.matmul")


@nki.jit
def accumulate_kernel(lhsT, rhs, out_dtype):
    k_total, m = lhsT.shape
    n = rhs.shape[1]
    out = nl.ndarray((m, n), dtype=out_dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((m, n), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(k_total // 128):
        a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
        b = nl.load(rhs[nl.ds(k * 128, 128), :])
        acc += nl.matmul(a, b, transpose_x=True)
    nl.store(out, value=nl.copy(acc, dtype=out_dtype))  # one rounding, after the whole accumulation
    return out


@pytest.mark.parametrize("out_dtype", [F32, BF16], ids=["out-f32", "out-bf16"])
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
def test_psum_accumulation_over_affine_range(dtype, out_dtype):
    x, y = rand((512, 64), dtype, seed=3), rand((512, 128), dtype, seed=4)
    got = accumulate_kernel(x, y, out_dtype.name)
    want = exact(x).T @ exact(y)
    if out_dtype == F32:
        assert_ulps(got, want, F32, atol=_dot_bound(exact(x), exact(y)), what="PSUM accumulation")
    else:
        # Rounded once from fp32: within an ulp of bf16, however the fp32 sum was ordered.
        assert_ulps(got, want, BF16, ulps=1, atol=_dot_bound(exact(x), exact(y)), what="PSUM accumulation")


def test_psum_accumulates_in_fp32_not_operand_dtype():
    # Partial sums that bf16 cannot hold: 1 + 2^-12 four times over is exact in fp32, lost if rounded to bf16.
    x = np.ones((512, 1), BF16)
    y = np.full((512, 128), 2.0**-12, BF16)
    y[0::128] = 1.0  # each 128-row K tile contributes 1 + 127 * 2^-12
    got = accumulate_kernel(x, y, "float32")
    np.testing.assert_array_equal(got, np.full((1, 128), 4 * (1 + 127 * 2.0**-12), np.float32))
