"""Lowering of nl.where (a Vector select: tensor_copy_predicated over a copy or memset of the other side),
nl.dropout (nisa.dropout) and masked transposes (masks over the result's axes): bit-identical to the traced IR
on the NumPy reference."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.passes.lowering import lowered_matches

RNG = np.random.default_rng(11)
X = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
Y = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
ROW = (RNG.standard_normal((1, 64))).astype(np.float32)
COL = (RNG.standard_normal((128, 1))).astype(np.float32)


def _names(low):
    return [s.name for s, _ in low.walk() if hasattr(s, "name")]


def _where_kernel(x_kind, y_kind):
    @nki.jit
    def k(x, y, row, col):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        a, b = nl.load(x), nl.load(y)
        cond = nl.greater(a, b)
        sides = {"tile": a, "number": 1.5, "row": nl.load(row), "col": nl.load(col)}
        nl.store(out, value=nl.where(cond, sides[x_kind] if x_kind != "tile" else a,
                                     sides[y_kind] if y_kind != "tile" else b))  # fmt: skip
        return out

    return k


@pytest.mark.parametrize("x_kind, y_kind", [
    ("tile", "tile"), ("tile", "number"), ("number", "tile"), ("number", "number"), ("row", "col"), ("col", "tile"),
])  # fmt: skip
def test_where_is_a_predicated_copy(x_kind, y_kind):
    low = lowered_matches(_where_kernel(x_kind, y_kind), X, Y, ROW, COL)
    names = _names(low)
    assert "nl.where" not in names and names.count("nisa.tensor_copy_predicated") == 1
    spread = "row" in (x_kind, y_kind)  # a [1, F] side is spread across partitions by a DMA first
    assert names.count("nisa.dma_copy") == 4 + 1 + spread  # four loads, the store and the spread


def test_where_of_mixed_dtypes_and_a_broadcast_condition():
    @nki.jit
    def k(x, y, c):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.where(nl.load(c), nl.load(x), nl.load(y)))
        return out

    ints = RNG.integers(-(2**26), 2**26, size=(128, 64)).astype(np.int32)  # rounding to fp32 happens once
    cond = (COL > 0).astype(np.float32)
    cond[0, 0] = np.nan  # NaN selects, as in np.where
    lowered_matches(k, ints, Y.astype(ml_dtypes.bfloat16), cond)


@nki.jit
def _masked_where(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    a, b = nl.load(x), nl.load(y)
    t = nl.zeros((128, 64), nl.float32)
    t[...] = nl.where(a > b, a, b, mask=(i_p < 100) & (i_f + i_p < 150))
    nl.store(out, value=t)
    return out


def test_masked_where():
    lowered_matches(_masked_where, X, Y)


@nki.jit
def _dropout(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.random_seed(9)
    a = nl.load(x)
    rate = nl.full((128, 1), 0.25, nl.float32)
    nl.store(out, value=nl.dropout(a, 0.5) + nl.dropout(a, rate))
    return out


def test_dropout_draws_what_nl_dropout_draws():
    low = lowered_matches(_dropout, X)
    assert _names(low).count("nisa.dropout") == 2


def _transpose_kernel(rows, cols):
    @nki.jit
    def k(x):
        out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(rows)[:, None]
        i_f = nl.arange(cols)[None, :]
        t = nl.zeros((cols, rows), x.dtype)
        t[...] = nl.transpose(nl.load(x), mask=(i_p < rows - 3) & (i_f < cols - 5))  # the source's indices
        nl.store(out, value=t)
        return out

    return k


@pytest.mark.parametrize("rows, cols, engine", [(24, 16, "vector"), (128, 64, "tensor"), (64, 64, "tensor")])
def test_masked_transpose(rows, cols, engine):
    low = lowered_matches(_transpose_kernel(rows, cols), X[:rows, :cols])
    transposes = [s for s, _ in low.walk() if getattr(s, "name", "") == "nisa.nc_transpose"]
    assert len(transposes) == 1 and transposes[0].attrs["engine"] == engine and transposes[0].mask is not None


@nki.jit
def _ragged_transposed_load(x):
    rows = x.shape[0]
    out = nl.ndarray((64, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        xt = nl.load_transpose2d(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < rows))
        j_p = nl.arange(64)[:, None]
        j_f = nl.arange(128)[None, :]
        nl.store(out[j_p, t * 128 + j_f], value=nl.exp(xt), mask=(t * 128 + j_f < rows))
    return out


def test_masked_load_transpose2d_is_a_masked_dma_transpose():
    # The last tile reads past the end of x: the verifier relates the mask (over the result's axes) to the
    # source through dma_transpose's permutation.
    low = lowered_matches(_ragged_transposed_load, np.concatenate([X, X])[:200])
    (dma,) = [s for s, _ in low.walk() if getattr(s, "name", "") == "nisa.dma_transpose"]
    assert dma.mask is not None
