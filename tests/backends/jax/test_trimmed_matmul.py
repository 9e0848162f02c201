"""An ``nl.matmul`` under a static row mask is computed on the box the mask keeps (``trim``): the result's rows
are x's axis 1 when x is given as [K, M] (``transpose_x``), else its axis 0, and the contraction axis K is never
cut. Checked against the NumPy reference on the rows the mask keeps, and against the untrimmed lowering."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.backends.jax import trim

KEPT = 100  # of the 128 rows of the result


@nki.jit
def row_masked_matmul(x, y, transpose_x):
    m = x.shape[1] if transpose_x else x.shape[0]
    out = nl.ndarray((m, y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    i_m, i_n = nl.arange(m)[:, None], nl.arange(y.shape[1])[None, :]
    r = nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x, mask=(i_m < KEPT))
    nl.store(out[i_m, i_n], value=r, mask=(i_m < KEPT))
    return out


def _jax(kernel, *args):
    return np.asarray(nki.jit(kernel.fn)(*args, backend="jax"))[:KEPT]  # (a fresh trace and executable)


@pytest.mark.parametrize("transpose_x", [True, False])
def test_a_row_masked_matmul_computes_the_kept_rows_over_the_whole_contraction(transpose_x, monkeypatch):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((128, 128)).astype(np.float32)  # [K, M] or [M, K]: cutting K would change every sum
    y = rng.standard_normal((128, 64)).astype(np.float32)
    want = np.asarray(row_masked_matmul(x, y, transpose_x, backend="numpy"))[:KEPT]
    np.testing.assert_allclose(want, ((x.T if transpose_x else x) @ y.astype(np.float64))[:KEPT], rtol=1e-4,
                               atol=1e-4)  # fmt: skip
    trimmed = _jax(row_masked_matmul, x, y, transpose_x)
    monkeypatch.setattr(trim, "ENABLED", False)
    whole = _jax(row_masked_matmul, x, y, transpose_x)
    np.testing.assert_allclose(trimmed, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trimmed, whole, rtol=1e-5, atol=1e-5)
