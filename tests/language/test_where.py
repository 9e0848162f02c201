"""``nl.where``: elementwise selection between tiles or scalars, with the condition a bool tile or a comparison."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F16, F32, assert_ulps, exact, rand


@nki.jit
def where_kernel(c, x, y, form):
    cond, tx, ty = nl.load(c), nl.load(x), nl.load(y)
    if form == "tiles":
        result = nl.where(cond, tx, ty)
    elif form == "compare":  # the condition computed in the kernel
        result = nl.where(tx > ty, tx, ty)
    elif form == "scalar_y":
        result = nl.where(cond, tx, -1.5)
    elif form == "scalar_x":
        result = nl.where(cond, 0.0, ty)
    else:  # dtype= rounds the selected values once
        result = nl.where(cond, tx, ty, dtype=nl.bfloat16)
    out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


# form -> (float64 formula of (c, x, y), result dtype given the tile dtype)
FORMS = {
    "tiles": (lambda c, x, y: np.where(c, x, y), lambda d: d),
    "compare": (lambda c, x, y: np.where(x > y, x, y), lambda d: d),
    "scalar_y": (lambda c, x, y: np.where(c, x, -1.5), lambda d: F32),  # a float scalar is fp32 (weak)
    "scalar_x": (lambda c, x, y: np.where(c, 0.0, y), lambda d: F32),
    "dtype": (lambda c, x, y: np.where(c, x, y), lambda d: BF16),
}


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_where(form, dtype):
    c = np.random.default_rng(0).random((128, 48)) < 0.5
    x, y = rand((128, 48), dtype, -4, 4, seed=1), rand((128, 48), dtype, -4, 4, seed=2)
    formula, out_dtype = FORMS[form]
    got = where_kernel(c, x, y, form)
    assert_ulps(got, formula(c, exact(x), exact(y)), out_dtype(dtype), ulps=0, what=f"where ({form})")
