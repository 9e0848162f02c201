"""The NumPy backend rounds each element of a matmul, a masked ``bn_stats`` and a ``bn_aggr`` the same whatever the
size of the tile around it, as the hardware computes an element the same way (so a shape family's instance, whose
last column block, K tile or statistics chunk is masked inside a fixed-size tile, computes the concrete trace's
numbers, where that block is cut to its size: tests/kernels/test_linear_width_families.py). Each case below
differed in the last bit before (NumPy's matmul, OpenBLAS's edge kernels and pairwise sums)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.numpy_ref.functions import matmul32 as _matmul32
from nki_dsl.backends.numpy_ref.lower_isa import _bn_aggr, _bn_stats

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("ks", [36, 128])
def test_a_matmul_column_rounds_as_in_a_wider_block(ks):
    """Columns 0..ns-1 of a [128, 512] product equal the [128, ns] product (ns % 16 in 1..8 took OpenBLAS's edge
    paths, ns = 1 NumPy's gemv), and zero rows of the contraction change nothing."""
    for ns in (1, 2, 5, 8, 17, 100, 255, 512):
        a = RNG.standard_normal((ks, 128)).astype(np.float32)
        b = RNG.standard_normal((ks, ns)).astype(np.float32)
        a_pad, b_pad = np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32)
        a_pad[:ks], b_pad[:ks, :ns] = a, b
        narrow = _matmul32(np.ascontiguousarray(a.T), b)
        wide = _matmul32(np.ascontiguousarray(a_pad.T), b_pad)[:, :ns]
        np.testing.assert_array_equal(narrow, wide, err_msg=f"{ns} columns")
        np.testing.assert_array_equal(_matmul32(np.ascontiguousarray(a[:, :3].T), b), narrow[:3])  # rows likewise


def _stats_kernel(width, kept):
    @nki.jit
    def stats(x):
        out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(width)[None, :]
        rows = nl.load(x[i_p, i_f])
        st = nisa.bn_stats(rows, mask=i_f < kept, dtype=nl.float32) if kept < width else nisa.bn_stats(rows)
        nl.store(out[i_p, nl.arange(6)[None, :]], value=st)
        return out

    return stats


@pytest.mark.parametrize("kept", [164, 200, 300])
def test_a_masked_bn_stats_rounds_as_the_bn_stats_of_the_kept_columns(kept):
    x = (2 * RNG.standard_normal((128, 512)) + 0.5).astype(np.float32)
    masked = _stats_kernel(512, kept)(x)
    narrow = _stats_kernel(kept, kept)(np.ascontiguousarray(x[:, :kept]))
    np.testing.assert_array_equal(masked, narrow)
    np.testing.assert_array_equal(narrow, _bn_stats(x[:, :kept]))


def test_a_bn_aggr_ignores_groups_of_no_elements():
    """Statistics of three chunks, then the zero slots of a fourth that a family's last chunk did not reach."""
    x = (2 * RNG.standard_normal((128, 512)) + 0.5).astype(np.float32)
    stats = np.concatenate([_bn_stats(x), _bn_stats(1.3 * x + 0.1), _bn_stats(x[:, :256])], axis=1)
    padded = np.concatenate([stats, np.zeros((128, 6), np.float32)], axis=1)
    np.testing.assert_array_equal(_bn_aggr(padded), _bn_aggr(stats))
    mean, var = x.astype(np.float64).mean(axis=1), x.astype(np.float64).var(axis=1)
    one = _bn_aggr(_bn_stats(x))
    np.testing.assert_allclose(one[:, 0], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(one[:, 1], var, rtol=1e-5)
