"""Masks on transposing ops are written in the source's indices; the out-of-bounds rule must read them so."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def transposed_rows(q, masked):
    rows, d = q.shape
    out = nl.ndarray((d, rows), dtype=q.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((rows + 127) // 128):
        i_q = t * 128 + nl.arange(128)[:, None]
        i_d = nl.arange(d)[None, :]
        if masked:
            qT = nl.load_transpose2d(q[i_q, i_d], mask=(i_q < rows))
            nl.store(out[nl.arange(d)[:, None], t * 128 + nl.arange(128)[None, :]], value=qT,
                     mask=(t * 128 + nl.arange(128)[None, :] < rows))
        else:
            qT = nl.load_transpose2d(q[i_q, i_d])
    return out


Q = np.random.default_rng(0).standard_normal((197, 64)).astype(np.float32)


def test_masked_transposed_load_is_in_bounds_and_exact():
    np.testing.assert_array_equal(transposed_rows(Q, True), Q.T)


def test_unmasked_ragged_transposed_load_is_rejected(rejected):
    (diag,) = [d for d in rejected(transposed_rows, Q, False).diagnostics if d.rule == "out-of-bounds"]
    assert diag.op == "nl.load_transpose2d"
    assert "index range [0, 255] exceeds dimension size of 197" in diag.message
