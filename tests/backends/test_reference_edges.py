"""The NumPy reference on the edges of its code generation: masks over two axes at once (the residual condition),
masks with coefficients (integer division rounding both ways), masked reductions of data below the identity a
careless backend would use, and permuted accesses of three axes (where a permutation is not its own inverse).
Every expected value is computed here by NumPy from the inputs."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl

P, F = np.mgrid[0:128, 0:64]


def data(shape, seed=0, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(np.float32)


@nki.jit
def accumulate_under_mask(x, form):
    """``acc[...] += f(x, mask=...)`` into a zeroed fp32 SBUF tile."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t = nl.load(x)
    if form == "lower_triangle":  # one constraint over two axes: no box, a residual condition
        acc[...] += nl.exp(t, mask=(i_f <= i_p))
    elif form == "scaled_from":  # 2f >= 5: columns from 3 (the box's lower edge rounds up)
        acc[...] += nl.exp(t, mask=(2 * i_f >= 5))
    elif form == "scaled_below":  # 3f < 41: columns up to 13 (the upper edge, 40/3, rounds down)
        acc[...] += nl.exp(t, mask=(3 * i_f < 41))
    elif form == "two_upper_bounds":  # f < 40 and 3f < 100: two edges on one axis, the box ends at the tighter
        acc[...] += nl.exp(t, mask=(i_f < 40) & (3 * i_f < 100))
    else:  # offset_window: f + 3 >= p - 60 and f - 2 < 20: an offset box on one axis, a residual over two
        acc[...] += nl.exp(t, mask=(i_f + 3 >= i_p - 60) & (i_f - 2 < 20))
    nl.store(out, value=acc)
    return out


WHERE = {
    "lower_triangle": F <= P,
    "scaled_from": 2 * F >= 5,
    "scaled_below": 3 * F < 41,
    "offset_window": (F + 3 >= P - 60) & (F - 2 < 20),
    "two_upper_bounds": (F < 40) & (3 * F < 100),
}


@pytest.mark.parametrize("form", sorted(WHERE))
def test_a_masked_accumulation_adds_only_where_the_mask_holds(form):
    x = data((128, 64), seed=1)
    got = accumulate_under_mask(x, form)
    want = np.where(WHERE[form], np.exp(x.astype(np.float64)), 0.0)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


@nki.jit
def masked_scaled_column_write(x, bound):
    """A fresh tile written only where ``2*f >= bound``; the rest of it is never written."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    nl.store(out, value=nl.exp(nl.load(x), mask=(2 * i_f >= bound)))
    return out


@pytest.mark.parametrize("bound", [4, 5, 6])
def test_a_scaled_lower_mask_writes_no_column_before_its_edge(bound):
    x = data((128, 64), seed=2)
    got = masked_scaled_column_write(x, bound)
    first = -(-bound // 2)  # ceil(bound / 2)
    assert np.isnan(got[:, :first]).all(), "columns before the mask's edge hold unwritten memory (NaN)"
    np.testing.assert_allclose(got[:, first:], np.exp(x[:, first:].astype(np.float64)), rtol=2e-6)


@pytest.mark.parametrize("reduce_op", ["maximum", "minimum", "add", "multiply"])
def test_a_reduction_under_a_two_axis_mask_ignores_the_masked_out_elements(reduce_op):
    """Data all below 0 for max (all above for min) shows a wrong identity: a 0 there would win."""
    sign = 1.0 if reduce_op == "minimum" else -1.0
    x = sign * data((128, 64), seed=3, lo=0.5, hi=1.5)
    op = getattr(nl, reduce_op)

    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        acc = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(data=nl.load(a), op0=nl.multiply, operand0=1.0, reduce_op=op, reduce_res=acc,
                                  mask=(i_f <= i_p))
        nl.store(out, value=acc)
        return out

    got = kernel(x)
    kept = np.where(F <= P, x.astype(np.float64), np.nan)
    want = {"maximum": np.nanmax, "minimum": np.nanmin, "add": np.nansum, "multiply": np.nanprod}[reduce_op](
        kept, axis=1, keepdims=True
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)


@nki.jit
def permuted_three_axes(x, direction):
    """Move the partition axis of a [128, 4, 8] tile last (store) or read it from last place (load)."""
    i_p, i_a, i_b = nl.mgrid[0:128, 0:4, 0:8]
    if direction == "store":
        out = nl.ndarray((4, 8, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[i_a, i_b, i_p], value=nl.load(x))
    else:
        out = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x[i_a, i_b, i_p]))
    return out


def test_a_store_with_three_permuted_axes_lands_each_element_where_its_index_says():
    x = data((128, 4, 8), seed=4)
    np.testing.assert_array_equal(permuted_three_axes(x, "store"), np.transpose(x, (1, 2, 0)))


def test_a_load_with_three_permuted_axes_reads_each_element_where_its_index_says():
    x = data((4, 8, 128), seed=5)
    np.testing.assert_array_equal(permuted_three_axes(x, "load"), np.transpose(x, (2, 0, 1)))


def test_an_sbuf_write_with_three_permuted_axes_inverts_the_permutation():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_a, i_b = nl.mgrid[0:128, 0:4, 0:8]
        t = nl.ndarray((128, 8, 4), dtype=nl.float32, buffer=nl.sbuf)
        t[i_p, i_b, i_a] = nl.load(x)  # SBUF-side permutation of the free axes
        nl.store(out, value=t)
        return out

    x = data((128, 4, 8), seed=6)
    np.testing.assert_array_equal(kernel(x), np.transpose(x, (0, 2, 1)))


@pytest.mark.parametrize(("dtype", "lo", "hi"), [("int8", -128, 127), ("uint8", 0, 255),
                                                 ("int32", -(2**31), 2**31 - 1)])  # fmt: skip
def test_float_to_int_conversions_saturate_at_both_ends(dtype, lo, hi):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=getattr(nl, dtype), buffer=nl.shared_hbm)
        nl.store(out, value=nl.copy(nl.load(x), dtype=getattr(nl, dtype)))
        return out

    x = np.array([[-1e10, -129.6, -0.4, 0.6, 126.5, 254.5, 1e10, np.nan]] * 128, np.float32)
    want = np.clip(np.nan_to_num(np.rint(x.astype(np.float64)), nan=0.0), lo, hi).astype(dtype)
    np.testing.assert_array_equal(kernel(x), want)
    assert kernel(x)[0, 6] == hi and kernel(x)[0, 0] == lo


@nki.jit
def masked_reversed_rows(x, rows):
    """Rows read bottom-up (a negative stride: an index array, not a slice), for the first ``rows`` rows only."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[127 - i_p, i_f], mask=(i_p < rows))
    nl.store(out[i_p, i_f], value=t, mask=(i_p < rows))
    return out


def test_a_masked_read_through_an_index_array_reads_the_masked_rows():
    x = data((128, 64), seed=7)
    got = masked_reversed_rows(x, 100)
    np.testing.assert_array_equal(got[:100], x[::-1][:100])
