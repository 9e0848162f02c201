import nki
import numpy as np
import pytest
from conftest import DTYPES, TOLERANCE, as64
from swiglu_mlp import MLPConfig, swiglu_mlp


def reference(x, wg, wu, wd):
    x, wg, wu, wd = as64(x), as64(wg), as64(wu), as64(wd)
    g = x @ wg
    return (g / (1 + np.exp(-g)) * (x @ wu)) @ wd


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cfg", [MLPConfig(), MLPConfig(row_tiles=True), MLPConfig(token_tile=256)])
@pytest.mark.parametrize("T,H,F", [(256, 128, 256), pytest.param(256, 256, 128, marks=pytest.mark.slow),
                                   pytest.param(512, 384, 256, marks=pytest.mark.slow)])
def test_swiglu_mlp(rng, dtype, cfg, T, H, F):
    dt = DTYPES[dtype]
    x = rng.standard_normal((T, H)).astype(dt)
    wg = (rng.standard_normal((H, F)) / np.sqrt(H)).astype(dt)
    wu = (rng.standard_normal((H, F)) / np.sqrt(H)).astype(dt)
    wd = (rng.standard_normal((F, H)) / np.sqrt(F)).astype(dt)
    y = nki.simulate(swiglu_mlp)(x, wg, wu, wd, cfg=cfg)
    tol = TOLERANCE[dtype] if dtype == "float32" else dict(rtol=5e-2, atol=5e-2)
    np.testing.assert_allclose(as64(y), reference(x, wg, wu, wd), **tol)


def test_row_tiles_give_the_same_numbers(rng):
    x = rng.standard_normal((128, 256)).astype(np.float32)
    wg, wu = rng.standard_normal((2, 256, 128)).astype(np.float32) / 16
    wd = rng.standard_normal((128, 256)).astype(np.float32) / 16
    plain = swiglu_mlp(x, wg, wu, wd)
    tiled = swiglu_mlp(x, wg, wu, wd, cfg=MLPConfig(row_tiles=True))
    np.testing.assert_allclose(tiled, plain, rtol=1e-5, atol=1e-6)
