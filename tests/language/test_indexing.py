"""Indexing tensors and tiles: ``nl.mgrid`` / ``nl.arange`` expressions (strided, offset), ``nl.ds``, slices,
``...``, and multi-dimensional on-chip tensors with a block dimension (``nl.par_dim``) indexed ``t[k, i.p, i.x]``."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import F32, assert_ulps, exact, rand


@nki.jit
def par_dim_kernel(a, b):
    """a, b: [K, 512]. Load K/128 blocks of a into one block tensor, then add the matching blocks of b."""
    k_total, n = a.shape
    blocks = nl.ndarray((k_total // 128, nl.par_dim(128), n), dtype=a.dtype, buffer=nl.sbuf)
    i = nl.mgrid[0:128, 0:n]
    for k in nl.affine_range(k_total // 128):
        blocks[k, i.p, i.x] = nl.load(a[k * 128 + i.p, i.x])
    out = nl.ndarray((k_total, n), dtype=a.dtype, buffer=nl.shared_hbm)
    for k in nl.affine_range(k_total // 128):
        nl.store(out[k * 128 + i.p, i.x], value=blocks[k, i.p, i.x] + nl.load(b[k * 128 + i.p, i.x]))
    return out


def test_par_dim_block_tensor():
    a, b = rand((512, 512), F32, seed=1), rand((512, 512), F32, seed=2)
    assert_ulps(par_dim_kernel(a, b), exact(a) + exact(b), F32, ulps=0.5, what="block tensor")


@nki.jit
def index_kernel(x, how):
    """x: [128, 64]; each form picks a [128, 32] window of x."""
    if how == "mgrid_even":  # every other column: an affine index with stride 2
        i_p, i_f = nl.mgrid[0:128, 0:32]
        t = nl.load(x[i_p, 2 * i_f])
    elif how == "arange_odd":
        i_p, i_f = nl.arange(128)[:, None], nl.arange(32)[None, :]
        t = nl.load(x[i_p, 2 * i_f + 1])
    elif how == "ds":
        t = nl.load(x[:, nl.ds(16, 32)])
    elif how == "slice_step":
        t = nl.load(x[0:128, 1:64:2])
    elif how == "ellipsis":  # `...` on a tile: the whole tile, then a slice of it
        t = nl.load(x)[..., 32:64]
    else:  # the last 32 columns, by negative slice bounds
        t = nl.load(x[:, -32:])
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[...], value=t)
    return out


WINDOWS = {
    "mgrid_even": lambda x: x[:, 0::2], "arange_odd": lambda x: x[:, 1::2], "ds": lambda x: x[:, 16:48],
    "slice_step": lambda x: x[:, 1::2], "ellipsis": lambda x: x[..., 32:64], "negative": lambda x: x[:, -32:],
}  # fmt: skip


@pytest.mark.parametrize("how", sorted(WINDOWS))
def test_index_forms(how):
    x = rand((128, 64), F32, seed=3)
    np.testing.assert_array_equal(index_kernel(x, how), WINDOWS[how](x))


@nki.jit
def loop_index_kernel(x):
    """Tiles addressed by loop indices: a [256, 256] tensor as 2x2 tiles of [128, 128], written transposed in
    the tile grid (tile (i, j) of x lands at tile (j, i) of the output)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:128]
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            tile = nl.load(x[i * 128 + i_p, j * 128 + i_f])
            nl.store(out[nl.ds(j * 128, 128), nl.ds(i * 128, 128)], value=tile)
    return out


def test_loop_indices_in_index_expressions():
    x = rand((256, 256), F32, seed=4)
    want = np.block([[x[:128, :128], x[128:, :128]], [x[:128, 128:], x[128:, 128:]]])
    np.testing.assert_array_equal(loop_index_kernel(x), want)


@nki.jit
def hbm_3d_kernel(x):
    """A 3-D HBM tensor: an integer first index selects a [128, 64] matrix."""
    out = nl.ndarray((x.shape[0], 128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for h in nl.affine_range(x.shape[0]):
        nl.store(out[h], value=nl.load(x[h, :, 0:64]) * 2.0)
    return out


def test_hbm_3d_indexing():
    x = rand((3, 128, 96), F32, seed=5)
    np.testing.assert_array_equal(hbm_3d_kernel(x), x[:, :, :64] * 2)


@nki.jit
def row_broadcast_kernel(v):
    """v: [4, 64]. Row 2 of v, picked by a one-element arange written ``[None, :]`` on the partition side:
    NumPy broadcasting makes it 2 in every column, not 2 plus the column number."""
    i_2 = nl.arange(2, 3)[None, :]
    i_f = nl.arange(64)[None, :]
    row = nl.load(v[i_2, i_f])  # [1, 64]
    out = nl.ndarray((1, 64), dtype=v.dtype, buffer=nl.shared_hbm)
    nl.store(out[nl.arange(1)[:, None], i_f], value=row)
    return out


def test_a_one_element_arange_broadcasts_as_its_value():
    v = rand((4, 64), F32, seed=5)
    np.testing.assert_array_equal(row_broadcast_kernel(v), v[2:3])
