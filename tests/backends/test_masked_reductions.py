"""Masks that constrain reduced free axes: the masked-off elements take no part in the reduction, on the NumPy
reference, the JAX backend and the simulator (which runs the lowered IR), checked against float64 formulas.

NKI runs ``nl.sum(x, axis=1, mask=...)`` over masked columns and ``nisa.bn_stats`` over a ragged tail under
``mask=(j * 512 + i < n)`` (the layernorm tutorial's v2 pattern); the tile positions the mask leaves out hold
poison (a masked load does not write them), so a backend that reduced them would return NaN.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiTraceError

BACKENDS = ("numpy", "jax", "simulator")


def run(kernel, *args, backend: str):
    if backend == "simulator":
        out, _ = nki.simulate(kernel, *args, target="trn2")
        return out
    return kernel(*args, backend=backend)


def f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


@nki.jit
def chunked_bn_stats(x):
    """Mean and variance per row of ``x`` [128, n <= 1024] from bn_stats over two 512-column chunks, each loaded
    into a fresh 512-column tile under the ragged-tail mask (its last columns stay poison)."""
    n = x.shape[1]
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats_out = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    i_s = nl.arange(6)[None, :]
    for j in nl.affine_range(2):
        chunk = nl.load(x[i_p, j * 512 + i_f], mask=(j * 512 + i_f < n))
        stats[i_p, j * 6 + i_s] = nisa.bn_stats(chunk[i_p, i_f], mask=(j * 512 + i_f < n))
    nl.store(out, value=nisa.bn_aggr(stats))
    nl.store(stats_out, value=stats)
    return out, stats_out


@pytest.mark.parametrize("backend", BACKENDS)
def test_bn_stats_over_a_ragged_tail_counts_only_the_unmasked_columns(backend):
    x = np.random.default_rng(0).uniform(-2, 3, size=(128, 1000)).astype(np.float32)
    mean_var, stats = (np.asarray(a) for a in run(chunked_bn_stats, x, backend=backend))
    assert np.isfinite(mean_var).all()
    np.testing.assert_allclose(mean_var[:, 0], f64(x).mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean_var[:, 1], f64(x).var(axis=1), rtol=1e-5, atol=1e-6)
    # The tail chunk holds columns 512..999: 244 even and 244 odd positions.
    tail = f64(x[:, 512:])
    np.testing.assert_array_equal(stats[:, 6], 244)
    np.testing.assert_array_equal(stats[:, 9], 244)
    np.testing.assert_allclose(stats[:, 7], tail[:, 0::2].mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats[:, 11], tail[:, 1::2].var(axis=1) * 244, rtol=1e-4, atol=1e-4)


@nki.jit
def bn_stats_of_an_sbuf_tail(x):
    """bn_stats reading 512-column windows of one [128, n] SBUF tile: the last window passes the tile's end, and
    the mask keeps it inside."""
    n = x.shape[1]
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    stats = nl.ndarray((128, 12), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    i_s = nl.arange(6)[None, :]
    xt = nl.load(x)
    for j in nl.affine_range(2):
        stats[i_p, j * 6 + i_s] = nisa.bn_stats(xt[i_p, j * 512 + i_f], mask=(j * 512 + i_f < n))
    nl.store(out, value=nisa.bn_aggr(stats))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_bn_stats_window_past_the_tile_end_is_accepted_under_its_mask(backend):
    x = np.random.default_rng(1).standard_normal((128, 1000)).astype(np.float32)
    got = np.asarray(run(bn_stats_of_an_sbuf_tail, x, backend=backend))
    np.testing.assert_allclose(got[:, 0], f64(x).mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, 1], f64(x).var(axis=1), rtol=1e-5, atol=1e-6)


@nki.jit
def masked_language_reductions(x):
    """Sums, maxima and products over masked columns: a column bound, a bound on both axes with keepdims, a
    triangle (a condition over two axes) and a bound that depends on the loop index."""
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    xt = nl.load(x)
    nl.store(out[i_p, 0], value=nl.sum(xt[i_p, i_f], axis=1, mask=(i_f < 300)))
    nl.store(out[i_p, 1], value=nl.max(xt[i_p, i_f], axis=1, keepdims=True, mask=(i_f < 300) & (i_p < 100)),
             mask=(i_p < 100))
    nl.store(out[i_p, 2], value=nl.sum(xt[i_p, i_f], axis=1, mask=(i_f <= i_p)))
    nl.store(out[i_p, 3], value=nisa.tensor_reduce(np.min, xt[i_p, i_f], axis=1, mask=(i_f >= 500)))
    for k in nl.affine_range(2):
        part = nl.sum(xt[i_p, i_f], axis=1, mask=(i_f < 100 * (k + 1)))
        nl.store(out[i_p, 4 + k], value=part)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_columns_take_no_part_in_nl_and_nisa_reductions(backend):
    x = np.random.default_rng(2).uniform(-1, 1, size=(128, 512)).astype(np.float32)
    got = np.asarray(run(masked_language_reductions, x, backend=backend))
    x64 = f64(x)
    np.testing.assert_allclose(got[:, 0], x64[:, :300].sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:100, 1], x64[:100, :300].max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[:, 2], np.tril(x64[:, :128]).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 3], x64[:, 500:].min(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[:, 4], x64[:, :100].sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 5], x64[:, :200].sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_mask_over_reduced_axes_is_kept_apart_from_the_result_mask():
    x = np.zeros((128, 512), np.float32)
    text = str(nki.trace(masked_language_reductions, x))
    # column bounds go to reduce_mask (over the input); the row bound also masks the result's rows
    assert "reduce_mask = [d0 <= 99, d1 <= 299]} mask[d0 <= 99]" in text
    assert "reduce_mask = [d0 - d1 >= 0]}" in text
    # the IR text reads back to the same kernel
    assert str(nki.parse_ir(text)) == text


def test_a_mean_under_a_mask_on_its_reduced_axis_is_refused_with_the_fix():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_f = nl.arange(512)[None, :]
        nl.store(out, value=nl.mean(nl.load(x), axis=1, mask=(i_f < 300)))
        return out

    with pytest.raises(NkiTraceError, match="whose element count it would change; reduce with nl.sum"):
        nki.trace(kernel, np.zeros((128, 512), np.float32))


@nki.jit
def masked_variances(rows, cube):
    """``nl.var`` under a mask on its kept axes: over the rows of a ragged row tile (``rows`` [100, 64] loaded into
    128 partitions, the last 28 poison) with keepdims, and per column of ``cube`` [128, 16, 8] reduced along its
    16-long middle axis without keepdims, the mask on the result's last axis (the input's last axis, poison past
    column 5): NumPy's two-pass mean-then-squares, step by step, only where the mask holds."""
    out = nl.ndarray((128, 9), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_r = nl.arange(64)[None, :]
    i_c = nl.arange(16)[None, :, None]
    i_k = nl.arange(8)[None, None, :]
    tile = nl.load(rows[i_p, i_r], mask=(i_p < 100))
    nl.store(out[i_p, 0], value=nl.var(tile, axis=1, keepdims=True, mask=(i_p < 100)), mask=(i_p < 100))
    block = nl.load(cube[nl.arange(128)[:, None, None], i_c, i_k], mask=(i_k < 5))
    i_f = nl.arange(8)[None, :]
    nl.store(out[i_p, 1 + i_f], value=nl.var(block, axis=1, mask=(i_f < 5)), mask=(i_f < 5))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_variance_under_a_mask_on_its_kept_axes_is_numpys_where_the_mask_holds(backend):
    rng = np.random.default_rng(9)
    rows = rng.standard_normal((100, 64)).astype(np.float32)
    cube = rng.uniform(-2, 3, size=(128, 16, 8)).astype(np.float32)
    got = np.asarray(run(masked_variances, rows, cube, backend=backend))
    np.testing.assert_allclose(got[:100, 0], f64(rows).var(axis=1), rtol=1e-5)
    # the cube's mask is on the input's last axis: taken as its middle (reduced) one, the mean would use 5 of 16
    np.testing.assert_allclose(got[:, 1:6], f64(cube).var(axis=1)[:, :5], rtol=1e-5)


@nki.jit
def layernorm_v2_ragged(input_tensor, epsilon, gamma_vector, beta_vector):
    """The layernorm tutorial's v2 for any row count and hidden size: bn_stats over bn_stats_fmax-column chunks
    of each row tile, the last chunk (and the last row tile) ragged and masked, then bn_aggr and tensor_scalar."""
    output_tensor = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, n = input_tensor.shape
    i_p_io = nl.arange(nl.tile_size.pmax)[:, None]
    i_f_io = nl.arange(n)[None, :]
    bn_fmax = nl.tile_size.bn_stats_fmax
    num_bn_stats = math.ceil(n / bn_fmax)
    i_f_bn = nl.arange(bn_fmax)[None, :]
    i_f_stats = nl.arange(6)[None, :]

    gamma_sb = nl.load(gamma_vector.reshape((1, n)))
    beta_sb = nl.load(beta_vector.reshape((1, n)))
    for i in nl.affine_range(math.ceil(num_rows / nl.tile_size.pmax)):
        rows = i * nl.tile_size.pmax + i_p_io
        input_sb = nl.load(input_tensor[rows, i_f_io], mask=(rows < num_rows))
        bn_stats_result = nl.ndarray((nl.tile_size.pmax, 6 * num_bn_stats), dtype=np.float32)
        for j in nl.affine_range(num_bn_stats):
            bn_stats_result[i_p_io, j * 6 + i_f_stats] = nisa.bn_stats(
                input_sb[i_p_io, j * bn_fmax + i_f_bn],
                mask=(rows < num_rows) & (j * bn_fmax + i_f_bn < n), dtype=np.float32)
        mean_var = nisa.bn_aggr(bn_stats_result, mask=(rows < num_rows))
        mean = mean_var[i_p_io, 0]
        var = mean_var[i_p_io, 1]
        rstd = nl.rsqrt(var + epsilon, mask=(rows < num_rows))
        normed = nisa.tensor_scalar(data=input_sb, op0=np.subtract, operand0=mean, op1=np.multiply,
                                    operand1=rstd, mask=(rows < num_rows))
        scaled = nisa.tensor_tensor(normed, gamma_sb.broadcast_to((nl.tile_size.pmax, n)), op=np.multiply,
                                    mask=(rows < num_rows))
        output_sb = nisa.tensor_tensor(scaled, beta_sb.broadcast_to((nl.tile_size.pmax, n)), op=np.add,
                                       dtype=input_tensor.dtype, mask=(rows < num_rows))
        nl.store(output_tensor[rows, i_f_io], value=output_sb, mask=(rows < num_rows))
    return output_tensor


@pytest.mark.parametrize("backend", BACKENDS)
def test_layernorm_v2_over_a_ragged_hidden_size_matches_numpy(backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 1000)).astype(np.float32) * 2 + 0.5
    gamma, beta = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    eps = 1e-5
    got = np.asarray(run(layernorm_v2_ragged, x, eps, gamma, beta, backend=backend))
    x64 = f64(x)
    mean, var = x64.mean(axis=1, keepdims=True), x64.var(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + eps) * f64(gamma) + f64(beta)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@nki.jit
def window_past_the_end(x):
    """Row sums of the 512-column window starting at column 500 of a [128, 1000] tile, masked to the tile."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
    xt = nl.load(x)
    nl.store(out, value=nl.sum(xt[i_p, 500 + i_f], axis=1, mask=(500 + i_f < x.shape[1])))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masked_reduction_window_past_the_tile_end_reads_only_the_tile(backend):
    x = np.random.default_rng(4).uniform(-1, 1, size=(128, 1000)).astype(np.float32)
    got = np.asarray(run(window_past_the_end, x, backend=backend))
    np.testing.assert_allclose(got[:, 0], f64(x)[:, 500:].sum(axis=1), rtol=1e-5, atol=1e-5)


@nki.jit
def bn_stats_from_column_three(x):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    i_f = nl.arange(x.shape[1])[None, :]
    nl.store(out, value=nisa.bn_stats(nl.load(x), mask=(i_f >= 3)))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_bn_stats_keeps_even_and_odd_by_position_in_the_tile(backend):
    x = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    got = np.asarray(run(bn_stats_from_column_three, x, backend=backend))
    even, odd = f64(x)[:, 4::2], f64(x)[:, 3::2]  # columns 3.. kept: 4, 6, ... are even, 3, 5, ... odd
    want = np.stack([np.full(128, even.shape[1]), even.mean(1), even.var(1) * even.shape[1],
                     np.full(128, odd.shape[1]), odd.mean(1), odd.var(1) * odd.shape[1]], axis=1)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
