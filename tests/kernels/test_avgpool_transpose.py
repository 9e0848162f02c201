"""Average pooling and transposes. Pooling sums pool*pool values and scales once (a few fp32 roundings);
transposes move values and are exact."""

import numpy as np
import pytest

from tests.kernels import formulas as ref
from tests.kernels.nki_style import avgpool, transpose2d


@pytest.mark.parametrize("shape,pool", [((128, 16, 16), 2), ((64, 12, 18), 3)])
def test_avgpool_tutorial(shape, pool):
    x = ref.randn(np.random.default_rng(pool), shape)
    ref.assert_close(avgpool.tensor_avgpool_kernel(x, pool), ref.avgpool(x, pool), 1e-6, 1e-6)


@pytest.mark.parametrize("shape,pool", [((300, 17, 13), 3), ((128, 8, 8), 4), ((5, 9, 9), 2)])
def test_avgpool_tiled_ragged(shape, pool):
    # Channels not a multiple of 128 (masked last tile) and images the pool does not divide (floor mode).
    x = ref.randn(np.random.default_rng(shape[0]), shape)
    ref.assert_close(avgpool.tensor_avgpool_tiled(x, pool), ref.avgpool(x, pool), 1e-6, 1e-6)


def test_avgpool_bf16():
    # One rounding of the fp32 window mean to bf16: 2^-9 relative.
    x = ref.randn(np.random.default_rng(7), (200, 8, 8), ref.LOW_PRECISION["bf16"])
    out = avgpool.tensor_avgpool_tiled(x, 2)
    assert out.dtype == x.dtype
    ref.assert_close(out, ref.avgpool(x, 2), 2.0**-8, 1e-6)


@pytest.mark.parametrize("f1,f2", [(6, 8), (1, 5), (16, 16)])
def test_transpose_free_axes(f1, f2):
    x = ref.randn(np.random.default_rng(f1), (128, f1 * f2))
    expected = x.reshape(128, f1, f2).transpose(0, 2, 1).reshape(128, f1 * f2)
    np.testing.assert_array_equal(transpose2d.tensor_transpose2D_kernel_(x, (f1, f2)), expected)


@pytest.mark.parametrize("kernel", [transpose2d.transpose_tiled_kernel, transpose2d.transpose_load_kernel],
                         ids=lambda k: k.__name__)  # fmt: skip
@pytest.mark.parametrize("shape", [(300, 200), (128, 128), (1, 257)])
def test_transpose_ragged(kernel, shape):
    x = ref.randn(np.random.default_rng(shape[1]), shape)
    np.testing.assert_array_equal(kernel(x), x.T)


@pytest.mark.parametrize("dtype", [ref.F32, ref.LOW_PRECISION["bf16"]])
def test_transpose_on_tensor_engine(dtype):
    x = ref.randn(np.random.default_rng(3), (256, 384), dtype)
    out = transpose2d.transpose_isa_kernel(x)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, x.T)
