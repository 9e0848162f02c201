"""Ops under a static mask computed on the mask's bounding box only (``nki_dsl/backends/jax/trim.py``).

Every kernel here reads, after the masked ops, the elements outside the box: a fresh result's poison (NaN) and a
written operand's old elements. A trim that computed or wrote the wrong elements, cut an operand along the wrong
axis, or let the box's padding leak into a tensor would show there. Each is checked against the NumPy reference
(NaN where it has NaN) and, compiled without XLA's YNNPACK fusions (which pick their summation order by shape),
bit for bit against the same lowering with trimming off; the jaxpr shows the box was computed alone.
"""

import re

import jax
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.jax import trim
from nki_dsl.backends.jax.program import build, to_held

P = 128
EXACT = {"xla_cpu_experimental_ynn_fusion_type": ""}


def _lowered(ir, args, enabled, monkeypatch):
    """The kernel's outputs from its JAX program, trimmed or not, and its jaxpr."""
    monkeypatch.setattr(trim, "ENABLED", enabled)
    _, fn = build(ir)
    held = [to_held(a, p.type) for a, p in zip(args, ir.params)]
    traced = jax.jit(fn).trace(*held)
    outs = traced.lower().compile(compiler_options=EXACT)(*held)[0]
    return [np.asarray(o) for o in outs], str(traced.jaxpr)


def _computes(text: str, box: str) -> bool:
    """Does the jaxpr compute a value of type ``box`` (``exp``, ``dot_general``...: not a slice or an update)?"""
    return re.search(rf":{re.escape(box)} = (exp|dot_general|mul|div|transpose|ne|add)\b", text) is not None


def _check(kernel, args, monkeypatch, boxes: tuple, rtol=2e-6):
    """Trimmed == untrimmed bit for bit, both like the NumPy reference (NaN where it has NaN); each of ``boxes``
    (jaxpr types such as ``f32[24,24]``) is computed in the trimmed jaxpr only."""
    ir = nki.trace(kernel, *args).ir
    on, text = _lowered(ir, args, True, monkeypatch)
    off, plain = _lowered(ir, args, False, monkeypatch)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    ref = kernel(*args, backend="numpy")
    for got, want in zip(on, ref if isinstance(ref, tuple) else (ref,)):
        np.testing.assert_allclose(got, np.asarray(want), rtol=rtol, atol=1e-6, equal_nan=True)
    for box in boxes:
        assert _computes(text, box) and not _computes(plain, box), box
    return on


@nki.jit
def _ragged_rows(x, n: int):
    """One tile whose rows 16 .. n-1 are live: a masked load, exp with its row sum fused (into a column memset to
    -1, whose other rows must keep -1), a division written into a tile memset to 7 (other rows keep 7), and a
    fresh masked result (other rows are poison). All three are stored whole."""
    rows, cols = x.shape
    out = nl.ndarray((3, P, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    ok = (i_p >= 16) & (i_p < n)
    tile = nl.load(x[i_p, i_f], mask=ok)
    total = nisa.memset((P, 1), -1.0, nl.float32)
    e = nisa.activation(np.exp, tile, bias=None, reduce_op=np.add, reduce_res=total, mask=ok)
    kept = nisa.memset((P, cols), 7.0, nl.float32)
    kept[i_p, i_f] = nisa.tensor_scalar(e, np.divide, total, mask=ok)
    fresh = nisa.tensor_tensor(e, tile, np.multiply, mask=ok)
    nl.store(out[0, i_p, i_f], value=kept)
    nl.store(out[1, i_p, i_f], value=fresh)
    nl.store(out[2, i_p, i_f], value=e)
    nl.store(sums[i_p, nl.arange(1)[None, :]], value=total)
    return out, sums


def test_a_ragged_tile_is_computed_on_its_live_rows_and_leaves_the_rest_as_before(monkeypatch):
    x = np.random.default_rng(0).standard_normal((P, 24)).astype(np.float32)
    (out, sums) = _check(_ragged_rows, (x, 40), monkeypatch, ("f32[24,24]",))
    e = np.exp(x[16:40])
    np.testing.assert_allclose(out[0, 16:40], e / e.sum(axis=1, keepdims=True), rtol=2e-6)
    np.testing.assert_allclose(sums[16:40, 0], e.sum(axis=1), rtol=2e-6)
    dead = np.r_[0:16, 40:P]
    assert (out[0, dead] == 7).all() and (sums[dead] == -1).all()  # what the masked writes never touched
    assert np.isnan(out[1, dead]).all() and np.isnan(out[2, dead]).all()  # fresh results: poison there


@nki.jit
def _masked_matmul(a, b, m: int, n: int):
    """``a.T @ b`` [128, 96] under ``8 <= row < m and col < n``, the PSUM tile (poison outside) copied out whole;
    then the transpose of ``a``'s first 64 columns (square) under ``4 <= col < 40``, which cuts ``a``'s
    partitions (a cut of its columns would give other values)."""
    k, _ = a.shape
    out = nl.ndarray((P, 96), dtype=nl.float32, buffer=nl.shared_hbm)
    out_t = nl.ndarray((64, k), dtype=nl.float32, buffer=nl.shared_hbm)
    i_k, i_m, i_n = nl.arange(k)[:, None], nl.arange(P)[None, :], nl.arange(96)[None, :]
    i_p, i_q, i_c = nl.arange(P)[:, None], nl.arange(64)[:, None], nl.arange(k)[None, :]
    sa, sb = nl.load(a[i_k, i_m]), nl.load(b[i_k, i_n])
    ps = nisa.nc_matmul(sa, sb, mask=(i_p >= 8) & (i_p < m) & (i_n < n))
    nl.store(out[i_p, i_n], value=nisa.tensor_copy(ps))
    t = nisa.nc_transpose(sa[i_k, nl.arange(64)[None, :]], mask=(i_c >= 4) & (i_c < 40))
    nl.store(out_t[i_q, i_c], value=nisa.tensor_copy(t))
    return out, out_t


def test_a_matmul_and_a_transpose_cut_the_operand_axes_their_mask_cuts(monkeypatch):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, P)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
    out, out_t = _check(_masked_matmul, (a, b, 70, 50), monkeypatch, ("f32[62,50]", "f32[64,36]"), rtol=1e-5)
    np.testing.assert_allclose(out[8:70, :50], a.T[8:70] @ b[:, :50], rtol=1e-4, atol=1e-4)
    assert np.isnan(out[:8]).all() and np.isnan(out[70:]).all() and np.isnan(out[:, 50:]).all()
    np.testing.assert_array_equal(out_t[:, 4:40], a[4:40, :64].T)  # exact: a transpose moves values
    assert np.isnan(out_t[:, :4]).all() and np.isnan(out_t[:, 40:]).all()


@nki.jit
def _triangle_and_reduce(x, n: int):
    """Under ``row < n and row >= col`` (a box of n rows, a triangle inside it) a product written into a tile of
    zeros; a row max of rows 10 .. n-1 without keepdims; a 2-D DMA transpose under ``col < n``."""
    _, cols = x.shape
    out = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    top = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    out_t = nl.ndarray((cols, P), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    tile = nl.load(x[i_p, i_f])
    low = nisa.memset((P, cols), 0.0, nl.float32)
    low[i_p, i_f] = nisa.tensor_tensor(tile, tile, np.multiply, mask=(i_p < n) & (i_p >= i_f))
    nl.store(out[i_p, i_f], value=low)
    peak = nisa.tensor_reduce(np.max, tile, axis=(1,), mask=(i_p >= 10) & (i_p < n))
    nl.store(top[i_p, nl.arange(1)[None, :]], value=peak)
    t = nisa.dma_transpose(tile, mask=nl.arange(P)[None, :] < n)
    nl.store(out_t[nl.arange(cols)[:, None], nl.arange(P)[None, :]], value=t)
    return out, top, out_t


def test_a_mask_over_several_axes_still_selects_inside_the_box(monkeypatch):
    x = np.random.default_rng(2).standard_normal((P, 32)).astype(np.float32)
    out, top, out_t = _check(_triangle_and_reduce, (x, 50), monkeypatch, ("f32[50,32]", "bool[40,32]"))
    want = np.where(np.tril(np.ones((P, 32), bool)) & (np.arange(P)[:, None] < 50), x * x, 0)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(top[10:50, 0], x[10:50].max(axis=1))
    assert np.isnan(top[:10]).all() and np.isnan(top[50:]).all()
    np.testing.assert_array_equal(out_t[:, :50], x[:50].T)
    assert np.isnan(out_t[:, 50:]).all()


def test_the_switch_turns_trimming_off(monkeypatch):
    x = np.random.default_rng(3).standard_normal((P, 24)).astype(np.float32)
    monkeypatch.setenv("NKI_JAX_TRIM", "0")
    assert not _computes(nki.emit(nki.jit(_ragged_rows.fn), x, 40, backend="jax"), "f32[24,24]")
    monkeypatch.setenv("NKI_JAX_TRIM", "1")
    assert _computes(nki.emit(nki.jit(_ragged_rows.fn), x, 40, backend="jax"), "f32[24,24]")


def test_ops_whose_handlers_build_index_patterns_are_not_trimmed():
    from nki_dsl.ir.ops import OPS

    for name in ("nisa.iota", "nisa.affine_select", "nisa.rng", "nisa.dropout", "nisa.tensor_tensor_scan"):
        op = type("FakeOp", (), {"name": name, "attrs": {}, "operands": {}})()
        assert not trim.trimmable(op, OPS[name].family)


@pytest.mark.slow
def test_gradients_through_trimmed_ops_are_the_untrimmed_ones(monkeypatch):
    x = np.random.default_rng(4).standard_normal((P, 24)).astype(np.float32)
    grads = []
    for enabled in (True, False):
        monkeypatch.setattr(trim, "ENABLED", enabled)
        k = nki.jit(_ragged_rows.fn)
        grads.append(np.asarray(jax.grad(lambda a, k=k: k(a, 40, backend="jax")[0][0].sum())(jax.numpy.asarray(x))))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    assert (grads[0][:16] == 0).all() and (grads[0][40:] == 0).all() and np.isfinite(grads[0]).all()


def test_a_static_write_mask_that_keeps_a_box_is_a_write_of_the_box():
    m = np.zeros((6, 5), bool)
    m[1:4, 2:5] = True
    assert trim.rectangle(m) == {0: (1, 3), 1: (2, 3)}
    assert trim.rectangle(np.ones((6, 5), bool)) == {}
    m[0, 0] = True  # an L: the bounding box holds elements the mask leaves out
    assert trim.rectangle(m) is None
    assert trim.rectangle(np.zeros((6, 5), bool)) is None
