"""Kernels in the style of a production kernel library (reference/nki.md §4.1 [NKILIB]), in the current API, each
against a float64 NumPy formula on both backends: cumsum with tensor_tensor_scan carrying a column across tiles,
RMSNorm with NKIObject helper classes, RoPE, a cascaded max."""

from dataclasses import dataclass

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.isa as lisa
import nki_dsl.language as lnl

BACKENDS = ["numpy", "simulator"]


def run(kernel, backend, *args):
    return kernel(*args) if backend == "numpy" else nki.simulate(kernel)(*args)


# -- cumsum: the scan's initial value is the previous tile's last column ------------------------------------------
@nki.jit
def cumsum(x):
    P, F = x.shape
    W = 512
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ones = nl.ndarray((P, W), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    carry = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=carry, value=0.0)
    for j in nl.affine_range(F // W):  # a range alias: the carried column makes it sequential
        t = nl.ndarray((P, W), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, j * W:(j + 1) * W])
        r = nl.ndarray((P, W), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=r, data0=ones, data1=t, initial=carry, op0=nl.multiply, op1=nl.add)
        nisa.tensor_copy(dst=carry, src=r[:, W - 1:W])
        nisa.dma_copy(dst=out[:, j * W:(j + 1) * W], src=r)
    return out


@nki_dsl.jit
def cumsum_legacy(x):
    P, F = x.shape
    W = 512
    out = lnl.ndarray(x.shape, x.dtype, buffer=lnl.shared_hbm)
    ones = lisa.memset((P, W), 1.0, lnl.float32)
    carry = lnl.zeros((P, 1), lnl.float32, buffer=lnl.sbuf)
    for j in lnl.sequential_range(F // W):
        r = lisa.tensor_tensor_scan(ones, lnl.load(x[:, j * W:(j + 1) * W]), carry, np.multiply, np.add)
        carry[...] = lisa.tensor_copy(r[:, W - 1:W])
        lnl.store(out[:, j * W:(j + 1) * W], value=r)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_across_tiles(backend):
    x = np.random.default_rng(0).uniform(-1, 1, (128, 2048)).astype(np.float32)
    got = run(cumsum, backend, x)
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64), axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got, cumsum_legacy(x))
    (loop,) = [s for s, _ in nki_dsl.trace(cumsum, x).ir.walk() if hasattr(s, "trip_count")]
    assert loop.kind == "sequential"


# -- RMSNorm with helper classes -------------------------------------------------------------------------------------
class NormConfig(nl.NKIObject):
    """Passed in as a kernel argument: a compile-time constant keyed by its fields."""

    def __init__(self, eps=1e-6, scale_by_weight=True):
        self.eps = eps
        self.scale_by_weight = scale_by_weight


@dataclass
class RowTiles(nl.NKIObject):
    """Made inside the kernel: how the rows split into partition tiles."""

    rows: int
    tile: int = 128

    def count(self):
        return self.rows // self.tile

    def span(self, i):
        return nl.ds(i * self.tile, self.tile)


@nki.jit
def rmsnorm(x, w, cfg):
    N, D = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    tiles = RowTiles(N)
    w_row = nl.ndarray((1, D), w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_row, src=w.reshape((1, D)))
    w_all = nl.broadcast_to(w_row, shape=(tiles.tile, D))
    for i in nl.affine_range(tiles.count()):
        t = nl.ndarray((tiles.tile, D), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[tiles.span(i), :])
        sq = nl.ndarray((tiles.tile, D), nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((tiles.tile, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        rstd = nl.ndarray((tiles.tile, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd, data=ss, op0=nl.multiply, operand0=1.0 / D, op1=nl.add, operand1=cfg.eps)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=rstd)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=rstd)
        if cfg.scale_by_weight:
            nisa.tensor_tensor(dst=t, data1=t, data2=w_all, op=nl.multiply)
        o = nl.ndarray((tiles.tile, D), x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=t)
        nisa.dma_copy(dst=out[tiles.span(i), :], src=o)
    return out


def _rmsnorm64(x, w, eps, scale):
    x = x.astype(np.float64)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return y * w if scale else y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale_by_weight", [True, False])
def test_rmsnorm_with_nkiobject_helpers(backend, scale_by_weight):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 384).astype(np.float32)
    cfg = NormConfig(eps=1e-5, scale_by_weight=scale_by_weight)
    got = run(rmsnorm, backend, x, w, cfg)
    np.testing.assert_allclose(got, _rmsnorm64(x, w, 1e-5, scale_by_weight), rtol=1e-5, atol=1e-5)


def test_nkiobject_arguments_key_the_specialisation():
    x = np.ones((128, 64), np.float32)
    w = np.full(64, 2.0, np.float32)
    a = rmsnorm(x, w, NormConfig(scale_by_weight=True))
    b = rmsnorm(x, w, NormConfig(scale_by_weight=False))  # another specialisation, not the cached one
    np.testing.assert_allclose(a, 2 * b, rtol=1e-6)


def test_nkiobject_with_a_non_constant_field_is_refused():
    with pytest.raises(nki_dsl.NkiApiError, match="not a compile-time value"):
        rmsnorm(np.ones((128, 64), np.float32), np.ones(64, np.float32), NormConfig(eps=object()))


# -- RoPE: rotate halves of each row by per-token angles --------------------------------------------------------------
@nki.jit
def rope(x, cos, sin):
    T, D = x.shape
    H = D // 2
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(T // 128):
        rows = nl.ds(i * 128, 128)
        t = nl.ndarray((128, D), nl.float32, buffer=nl.sbuf)
        c = nl.ndarray((128, H), nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, H), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[rows, :])
        nisa.dma_copy(dst=c, src=cos[rows, :])
        nisa.dma_copy(dst=s, src=sin[rows, :])
        x1, x2 = t[:, 0:H], t[:, H:D]
        a = nl.ndarray((128, H), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, H), nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((128, D), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a, data1=x1, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=b, data1=x2, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=r[:, 0:H], data1=a, data2=b, op=nl.subtract)  # x1 cos - x2 sin
        nisa.tensor_tensor(dst=a, data1=x2, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=b, data1=x1, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=r[:, H:D], data1=a, data2=b, op=nl.add)  # x2 cos + x1 sin
        nisa.dma_copy(dst=out[rows, :], src=r)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_rope(backend):
    rng = np.random.default_rng(2)
    T, D = 256, 128
    x = rng.standard_normal((T, D)).astype(np.float32)
    theta = np.outer(np.arange(T), 1e-2 ** (np.arange(D // 2) / (D // 2)))
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    got = run(rope, backend, x, cos, sin)
    x64, c64, s64 = x.astype(np.float64), cos.astype(np.float64), sin.astype(np.float64)
    x1, x2 = x64[:, : D // 2], x64[:, D // 2:]
    expected = np.concatenate([x1 * c64 - x2 * s64, x2 * c64 + x1 * s64], axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# -- cascaded max: per-tile maxima into columns, then the max of those ------------------------------------------------
@nki.jit
def row_max(x):
    P, F = x.shape
    W = 512
    out = nl.ndarray((P, 1), x.dtype, buffer=nl.shared_hbm)
    partial = nl.ndarray((P, F // W), nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(F // W):
        t = nl.ndarray((P, W), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, j * W:(j + 1) * W])
        nisa.tensor_reduce(dst=partial[:, j:j + 1], op=nl.maximum, data=t, axis=1, keepdims=True)
    m = nl.ndarray((P, 1), x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.maximum, data=partial, axis=1, keepdims=True)
    nisa.dma_copy(dst=out, src=m)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_cascaded_max(backend):
    x = np.random.default_rng(3).standard_normal((128, 4096)).astype(np.float32)
    np.testing.assert_array_equal(run(row_max, backend, x), x.max(axis=1, keepdims=True))
    (loop,) = [s for s, _ in nki_dsl.trace(row_max, x).ir.walk() if hasattr(s, "trip_count")]
    assert loop.kind == "affine"  # each iteration writes its own column
