import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from qkv_projection import qkv_projection


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("T,H,NQ,NKV", [(128, 128, 256, 64),
                                         pytest.param(256, 256, 512, 128, marks=pytest.mark.slow)])
def test_qkv_projection(rng, dtype, T, H, NQ, NKV):
    dt = DTYPES[dtype]
    x = rng.standard_normal((T, H)).astype(dt)
    weights = tuple((rng.standard_normal((H, n)) / np.sqrt(H)).astype(dt) for n in (NQ, NKV, NKV))
    q, k, v = nki.simulate(qkv_projection)(x, weights)
    tol = TOLERANCE[dtype] if dtype == "float32" else dict(rtol=3e-2, atol=3e-2)
    for got, w in zip((q, k, v), weights):
        assert got.dtype == x.dtype
        np.testing.assert_allclose(as64(got), as64(x) @ as64(w), **tol)


def test_two_weights_only(rng):
    x = rng.standard_normal((128, 128)).astype(np.float32)
    w = tuple(rng.standard_normal((2, 128, 32)).astype(np.float32) / 11)
    outs = qkv_projection(x, w)
    assert len(outs) == 2
    for got, wi in zip(outs, w):
        np.testing.assert_allclose(got, as64(x) @ as64(wi), rtol=1e-5, atol=1e-5)
