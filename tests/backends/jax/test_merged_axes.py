"""Accesses whose tensor dimension is indexed by several access axes in a row-major chain (a 3-D view of a 2-D
tile, ``t[p, g * d + c]``) are slices and reshapes on the JAX backend, not gathers and scatters
(``backends/jax/access.py``): every kernel here runs on JAX and on the NumPy reference, bit for bit, and its lowered
program is checked for gathers and scatters. Loads and stores, SBUF, PSUM and HBM, masked and unmasked, static and
loop-variable offsets, strided chains, chains of three axes, chains whose axes are permuted against the access's
axis order, and a dimension whose coefficients are not a chain (which must still be right, as a gather)."""

import collections
import re

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import runtime
from nki_dsl.backends.jax.program import build
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access


def hlo_ops(kernel, *args, **kwargs) -> collections.Counter:
    """The StableHLO ops of the program the kernel lowers to on the JAX backend (lowered, not compiled)."""
    ir = nki.trace(kernel, *args, **kwargs).ir
    _, fn = build(ir)
    specs = [jax.ShapeDtypeStruct(p.type.shape, runtime.storage_dtype(p.type.dtype)) for p in ir.params]
    text = jax.jit(fn).lower(*specs).as_text()
    return collections.Counter(re.findall(r'"?stablehlo\.(\w+)"?[ (]', text))


def run_both(kernel, *args):
    ref = kernel(*args)
    got = kernel(*args, backend="jax")
    ref, got = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(np.asarray(g), r)  # bit for bit: only copies and exact scalings
    return ref


def no_gathers(kernel, *args):
    ops = hlo_ops(kernel, *args)
    assert ops["gather"] == 0 and ops["scatter"] == 0, ops


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@nki.jit
def _regroup(x, g, d, stride, sequential):
    """Row tiles of ``x`` ([rows, stride * g * d]) through 3-D views ``[128, g, d]`` of 2-D tiles: a load from HBM and
    a write into SBUF by merged axes, a scaling that reads the SBUF tile by them, a copy into a PSUM tile by them,
    and stores to three outputs: ``out`` in the same layout, ``outT`` with the chain permuted (column ``c * g + h``
    holds head h's column c), ``outS`` at x's strided columns (the ones between stay unwritten: poison). A ragged
    last row tile is masked; the tile loop (vectorised: its iterations are
    independent) is an affine or a sequential range."""
    rows, _ = x.shape
    w = g * d
    out = nl.ndarray((rows, w), dtype=x.dtype, buffer=nl.shared_hbm)
    outT = nl.ndarray((rows, w), dtype=x.dtype, buffer=nl.shared_hbm)
    outS = nl.ndarray((rows, stride * w), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3, i_g3, i_d3 = nl.arange(128)[:, None, None], nl.arange(g)[None, :, None], nl.arange(d)[None, None, :]
    for t in (nl.sequential_range if sequential else nl.affine_range)((rows + 127) // 128):
        tile = nl.ndarray((nl.par_dim(128), w), dtype=x.dtype)
        ps = nl.ndarray((nl.par_dim(128), w), dtype=nl.float32, buffer=nl.psum)
        r = t * 128 + i_p3
        tile[i_p3, i_g3 * d + i_d3] = nl.load(x[r, stride * (i_g3 * d + i_d3)], mask=r < rows)
        ps[i_p3, i_g3 * d + i_d3] = nl.multiply(tile[i_p3, i_g3 * d + i_d3], 2.0, mask=r < rows, dtype=nl.float32)
        nl.store(out[r, i_g3 * d + i_d3], value=ps[i_p3, i_g3 * d + i_d3], mask=r < rows)
        nl.store(outT[r, i_d3 * g + i_g3], value=tile[i_p3, i_g3 * d + i_d3], mask=r < rows)
        nl.store(outS[r, stride * (i_g3 * d + i_d3)], value=tile[i_p3, i_g3 * d + i_d3], mask=r < rows)
    return out, outT, outS


@pytest.mark.parametrize(("rows", "g", "d", "stride", "sequential"),
                         [(256, 2, 64, 1, True), (200, 3, 8, 1, False), (130, 4, 5, 2, False), (384, 2, 3, 3, True),
                          (1, 1, 7, 1, False)])  # fmt: skip
def test_loads_and_stores_through_merged_axes_match_the_reference(rows, g, d, stride, sequential):
    x = data((rows, stride * g * d))
    out, outT, outS = run_both(_regroup, x, g, d, stride, sequential)
    picked = x[:, ::stride]
    np.testing.assert_array_equal(out, 2 * picked)
    np.testing.assert_array_equal(outS[:, ::stride], picked)
    assert np.isnan(outS).sum() == rows * (stride - 1) * g * d
    np.testing.assert_array_equal(outT, picked.reshape(rows, g, d).transpose(0, 2, 1).reshape(rows, g * d))
    no_gathers(_regroup, x, g, d, stride, sequential)


@nki.jit
def _running_sum(x, g, d, stride):
    """Column block t of ``x`` ([128, blocks * stride * g * d]) read by merged, strided axes at a loop-variable
    offset, added into a PSUM accumulator through merged axes (a loop-carried dependence: a fori_loop, so every
    start is traced), and the running sum stored at row tile t."""
    blocks = x.shape[1] // (stride * g * d)
    w = g * d
    out = nl.ndarray((blocks * 128, w), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3, i_g3, i_d3 = nl.arange(128)[:, None, None], nl.arange(g)[None, :, None], nl.arange(d)[None, None, :]
    total = nl.ndarray((nl.par_dim(128), w), dtype=nl.float32, buffer=nl.psum)
    total[i_p3, i_g3 * d + i_d3] = nl.zeros((128, g, d), dtype=nl.float32)
    for t in nl.sequential_range(blocks):
        tile = nl.load(x[i_p3, t * stride * w + stride * (i_g3 * d + i_d3)])
        total[i_p3, i_g3 * d + i_d3] = nl.add(total[i_p3, i_g3 * d + i_d3], tile)
        nl.store(out[t * 128 + i_p3, i_g3 * d + i_d3], value=total[i_p3, i_g3 * d + i_d3])
    return out


@pytest.mark.parametrize(("g", "d", "stride", "blocks"), [(2, 8, 1, 3), (3, 5, 2, 2)])
def test_merged_axes_at_traced_offsets_in_a_loop(g, d, stride, blocks):
    x = data((128, blocks * stride * g * d), seed=4)
    (out,) = run_both(_running_sum, x, g, d, stride)
    parts = x[:, ::stride].reshape(128, blocks, g * d)
    want = np.concatenate([parts[:, : t + 1].sum(axis=1, dtype=np.float32) for t in range(blocks)])
    np.testing.assert_allclose(out, want, rtol=1e-6)
    ops = hlo_ops(_running_sum, x, g, d, stride)
    assert ops["while"] == 1 and ops["dynamic_slice"] > 0, ops  # the loop is a loop, its starts traced
    assert ops["gather"] == 0 and ops["scatter"] == 0, ops


@nki.jit
def _three_axis_chain(x, a, b, c):
    """Column block k of ``x`` ([128, 2 * a * b * c]) as a 4-D view [128, a, b, c] (one dimension, three axes), stored
    with the chain permuted (axis c outermost) into block k of ``out``, k the index of an affine (vectorised) loop."""
    w = a * b * c
    out = nl.ndarray((128, 2 * w), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None, None, None]
    i_a, i_b = nl.arange(a)[None, :, None, None], nl.arange(b)[None, None, :, None]
    i_c = nl.arange(c)[None, None, None, :]
    for k in nl.affine_range(2):
        tile = nl.load(x[i_p, k * w + i_a * (b * c) + i_b * c + i_c])
        nl.store(out[i_p, k * w + i_c * (a * b) + i_a * b + i_b], value=tile)
    return out


def test_a_chain_of_three_axes_permuted_in_an_affine_loop():
    a, b, c = 2, 3, 4
    x = data((128, 2 * a * b * c), seed=1)
    (out,) = run_both(_three_axis_chain, x, a, b, c)
    want = x.reshape(128, 2, a, b, c).transpose(0, 1, 4, 2, 3).reshape(128, -1)
    np.testing.assert_array_equal(out, want)
    no_gathers(_three_axis_chain, x, a, b, c)


@nki.jit
def _masked_columns(x, g, d, limit):
    """A store whose mask cuts the merged columns (``g * d + c < limit``, a condition over two axes)."""
    out = nl.ndarray((128, g * d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3, i_g3, i_d3 = nl.arange(128)[:, None, None], nl.arange(g)[None, :, None], nl.arange(d)[None, None, :]
    nl.store(out[i_p3, i_g3 * d + i_d3], value=nl.zeros((128, g, d), dtype=x.dtype))
    tile = nl.load(x[i_p3, i_g3 * d + i_d3])
    nl.store(out[i_p3, i_g3 * d + i_d3], value=tile, mask=i_g3 * d + i_d3 < limit)
    return out


def test_a_mask_over_merged_axes_keeps_the_old_elements():
    x = data((128, 24), seed=2)
    (out,) = run_both(_masked_columns, x, 3, 8, 13)
    np.testing.assert_array_equal(out[:, :13], x[:, :13])
    assert (out[:, 13:] == 0).all()
    no_gathers(_masked_columns, x, 3, 8, 13)


@nki.jit
def _not_a_chain(x):
    """Column ``5 * g + c`` for c < 8: the axes overlap (5 < 8), so no slice and reshape gives it."""
    out = nl.ndarray((128, 3, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3, i_g3, i_d3 = nl.arange(128)[:, None, None], nl.arange(3)[None, :, None], nl.arange(8)[None, None, :]
    nl.store(out[i_p3, i_g3, i_d3], value=nl.load(x[i_p3, i_g3 * 5 + i_d3]))
    return out


def test_overlapping_coefficients_are_not_merged_and_still_read_right():
    x = data((128, 18), seed=3)
    (out,) = run_both(_not_a_chain, x)
    np.testing.assert_array_equal(out, np.stack([x[:, 5 * h:5 * h + 8] for h in range(3)], axis=1))
    assert hlo_ops(_not_a_chain, x)["gather"] == 1


def _access(index, shape, tshape):
    tensor = type("T", (), {"name": "t", "type": type("Ty", (), {"shape": tshape})()})()
    return Access(tensor, tuple(index), tuple(shape))


def _axis(k, c=1):
    return Affine.var(f"d{k}", c)


def test_the_plan_of_chains_and_of_what_is_not_one():
    # [p, g * 4 + c]: one chain, stride 1
    p = acc.plan(_access([_axis(0), _axis(1, 4) + _axis(2)], (8, 3, 4), (8, 12)), {})
    assert p.box and p.chains == ((0,), (1, 2)) and p.strides == (1, 1)
    assert acc.window(p) == ((8, 12), True)
    # stride 2, the chain's axes out of the access's order, an extent-1 axis with any coefficient left out
    p = acc.plan(_access([_axis(0), _axis(1, 2) + _axis(2, 6) + _axis(3, -7)], (8, 3, 4, 1), (8, 24)), {})
    assert p.box and p.chains == ((0,), (2, 1)) and p.strides == (1, 2)
    assert acc.window(p) == ((8, 23), False)
    # overlapping (g * 3 + c, c < 4), gapped (g * 5 + c) and an axis in two dimensions: gathers
    for index in ([_axis(0), _axis(1, 3) + _axis(2)], [_axis(0), _axis(1, 5) + _axis(2)],
                  [_axis(0) + _axis(2), _axis(1, 4) + _axis(2)]):  # fmt: skip
        assert not acc.plan(_access(index, (8, 3, 4), (16, 20)), {}).box


@nki.jit
def _dma_regroup(x, g, d):
    """nisa.dma_copy from a 3-D HBM view into merged SBUF columns, then a store of the tile (the kernel library's
    pattern for loading a group of heads at once)."""
    _, heads, seq, _ = x.shape
    out = nl.ndarray((seq, heads * d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_s3, i_g3, i_d3 = nl.arange(seq)[:, None, None], nl.arange(g)[None, :, None], nl.arange(d)[None, None, :]
    for hg in nl.affine_range(heads // g):
        sb = nl.ndarray((nl.par_dim(seq), g * d), dtype=x.dtype)
        nisa.dma_copy(dst=sb[i_s3, i_g3 * d + i_d3], src=x[0, hg * g + i_g3, i_s3, i_d3])
        nl.store(out[nl.arange(seq)[:, None], hg * g * d + nl.arange(g * d)[None, :]], value=sb)
    return out


@settings(max_examples=6, deadline=None, derandomize=True)
@given(g=st.integers(1, 4), d=st.integers(1, 9), groups=st.integers(1, 3), seq=st.integers(1, 128))
def test_dma_copies_into_merged_columns_match_the_reference(g, d, groups, seq):
    x = data((1, g * groups, seq, d), seed=g * 100 + d)
    (out,) = run_both(_dma_regroup, x, g, d)
    np.testing.assert_array_equal(out, x[0].transpose(1, 0, 2).reshape(seq, -1))
    no_gathers(_dma_regroup, x, g, d)


@pytest.mark.parametrize("layout", ["bhsd", "qkv"])
def test_the_grouped_heads_attention_lowers_without_gathers_or_scatters(layout):
    # The library's ViT attention moves a group of heads per transfer through 3-D views of 2-D tiles (k^T as
    # [d, group * seq], V and the outputs as [128, group * d], two heads' accumulators side by side in one PSUM
    # bank): every one of those accesses must lower to slices and reshapes.
    from kernels.vit_attn.kernel import attention_kernel, attention_qkv_kernel

    heads, seq, d = 4, 130, 16
    if layout == "bhsd":
        q, k, v = (data((1, heads, seq, d), seed=s) for s in (5, 6, 7))
        kernel, args, kwargs = attention_kernel, (q, k, v), {}
    else:
        qkv = data((1, seq, 3 * heads * d), seed=8)
        kernel, args, kwargs = attention_qkv_kernel, (qkv,), {"num_heads": heads}
    ops = hlo_ops(kernel, *args, **kwargs)
    assert ops["gather"] == 0 and ops["scatter"] == 0, ops
    assert ops["dot_general"] > 0  # (the program is the kernel's, not an empty one)
    # (its numbers on JAX: tests/kernels/test_vit_attn.py, through the backend fixture)
