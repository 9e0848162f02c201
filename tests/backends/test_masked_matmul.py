"""``nl.matmul(..., mask=)``: the mask ranges over the result [M, N]; rows and columns outside it stay poison."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def masked_product(x, y, transpose_x, m_valid, n_valid):
    m = x.shape[1] if transpose_x else x.shape[0]
    out = nl.ndarray((m, y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    i_m, i_n = nl.arange(m)[:, None], nl.arange(y.shape[1])[None, :]
    product = nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x, mask=(i_m < m_valid) & (i_n < n_valid))
    nl.store(out, value=nl.copy(product))
    return out


@pytest.mark.parametrize("transpose_x", [True, False])
@pytest.mark.parametrize("m_valid, n_valid", [(128, 96), (70, 96), (1, 1), (70, 5)])
def test_masked_matmul_computes_only_inside_the_mask(transpose_x, m_valid, n_valid):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 128) if transpose_x else (128, 64)).astype(np.float32)
    y = rng.standard_normal((64, 96)).astype(np.float32)
    got = masked_product(x, y, transpose_x, m_valid, n_valid)
    expected = (x.T if transpose_x else x).astype(np.float64) @ y
    np.testing.assert_allclose(got[:m_valid, :n_valid], expected[:m_valid, :n_valid], rtol=1e-5, atol=1e-5)
    outside = np.ones(got.shape, bool)
    outside[:m_valid, :n_valid] = False
    assert np.isnan(got[outside]).all(), "elements the mask excludes were never written: they read as poison"
