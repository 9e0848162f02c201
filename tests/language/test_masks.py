"""``mask=`` on nl ops: the op computes only where the mask holds; elsewhere its fresh result tile keeps the
poison of unwritten memory (NaN), so a kernel that reads outside its mask shows it."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, assert_ulps, exact, rand


@nki.jit
def masked_kernel(x, form):
    """x: [128, 64]. Each form applies one op under a mask over the tile's partition (p) and free (f) axes."""
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    if form == "unary":
        r = nl.exp(t, mask=(i_p < 100))
    elif form == "binary_2d":
        r = nl.multiply(t, 3, mask=(i_p >= 16) & (i_f < 40))  # an int scalar keeps bf16
    elif form == "diagonal":  # a condition over two axes at once
        r = nl.add(t, t, mask=(i_f - i_p < 0))
    elif form == "where":
        r = nl.where(t > 0, t, -t, mask=(i_p < 64))
    elif form == "reduce":
        r = nl.sum(t, axis=1, keepdims=True, mask=(i_p < 100))
    else:  # transpose: the mask is written over the source's axes
        r = nl.transpose(t, mask=(i_p < 32))
    out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=r)
    return out


P, F = np.mgrid[0:128, 0:64]
# form -> (float64 formula of x, where it applies (over x's axes; the result's for reduce))
FORMS = {
    "unary": (np.exp, P < 100),
    "binary_2d": (lambda x: 3 * x, (P >= 16) & (F < 40)),
    "diagonal": (lambda x: 2 * x, F - P < 0),
    "where": (np.abs, P < 64),
    "reduce": (lambda x: x.sum(axis=1, keepdims=True), (P < 100)[:, :1]),
    "transpose": (lambda x: x.T, (P < 32).T),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_masked_ops(form):
    x = rand((128, 64), BF16, -2, 2, seed=1)
    got = masked_kernel(x, form)
    formula, where = FORMS[form]
    want = np.where(where, formula(exact(x)), np.nan)
    atol = 64 * 2 * 2.0**-23 * 64 if form == "reduce" else 0.0
    assert_ulps(got, want, BF16, atol=atol, what=f"masked {form}")
