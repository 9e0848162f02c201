"""The destination-passing ``nisa`` ops against NumPy formulas, on both backends, each beside its legacy
instruction (one IR: the numbers are identical)."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.isa as lisa
import nki_dsl.language as lnl
from tests.current_api.kernel_io import out as _out
from tests.current_api.kernel_io import sbuf as _sbuf

RNG = np.random.default_rng(7)
A = RNG.uniform(-2, 2, (128, 64)).astype(np.float32)
B = RNG.uniform(0.5, 2, (128, 64)).astype(np.float32)
COL = RNG.uniform(-1, 1, (128, 1)).astype(np.float32)




def _unary(body, shape=(128, 64), dtype=nl.float32):
    @nki.jit
    def kernel(a, b, col):
        r = nl.ndarray(shape, dtype, buffer=nl.sbuf)
        body(r, _sbuf(a), _sbuf(b), _sbuf(col))
        return _out(r)

    return kernel


CASES = {
    "activation_exp_scale_bias": (
        lambda r, a, b, c: nisa.activation(dst=r, op=nl.exp, data=a, bias=c, scale=0.5),
        lambda: np.exp(A * 0.5 + COL),
        lambda a, b, c: lisa.activation(np.exp, a, bias=c, scale=0.5)),
    "activation_scalar_bias_bypass": (
        lambda r, a, b, c: nisa.activation(dst=r, op=nl.bypass, data=a, bias=0.25, scale=c),
        lambda: A * COL + 0.25,
        lambda a, b, c: lisa.activation("copy", a, bias=lisa.memset((128, 1), 0.25, np.float32), scale=c)),
    "tensor_tensor_subtract": (
        lambda r, a, b, c: nisa.tensor_tensor(dst=r, data1=a, data2=b, op=nl.subtract),
        lambda: A - B,
        lambda a, b, c: lisa.tensor_tensor(a, b, np.subtract)),
    "tensor_scalar_two_stages": (
        lambda r, a, b, c: nisa.tensor_scalar(dst=r, data=a, op0=nl.multiply, operand0=c, op1=nl.add,
                                              operand1=3.0, reverse1=True),
        lambda: 3.0 + A * COL,
        lambda a, b, c: lisa.tensor_scalar(a, np.multiply, c, op1=np.add, operand1=3.0, reverse1=True)),
    "reciprocal": (
        lambda r, a, b, c: nisa.reciprocal(dst=r, data=b),
        lambda: 1.0 / B,
        lambda a, b, c: lisa.reciprocal(b)),
    "tensor_copy": (
        lambda r, a, b, c: nisa.tensor_copy(dst=r, src=a, engine=nisa.engine.scalar),
        lambda: A,
        lambda a, b, c: lisa.tensor_copy(a, engine=lisa.engine.scalar)),
    "memset": (
        lambda r, a, b, c: nisa.memset(dst=r, value=2.5),
        lambda: np.full((128, 64), 2.5),
        lambda a, b, c: lisa.memset((128, 64), 2.5, np.float32)),
    "scalar_tensor_tensor": (
        lambda r, a, b, c: nisa.scalar_tensor_tensor(dst=r, data=a, op0=nl.subtract, operand0=c, op1=nl.multiply,
                                                     operand1=b),
        lambda: (A - COL) * B,
        lambda a, b, c: lisa.scalar_tensor_tensor(data=a, op0=np.subtract, operand0=c, op1=np.multiply,
                                                  operand1=b)),
    "tensor_tensor_scan_cumsum": (
        lambda r, a, b, c: nisa.tensor_tensor_scan(dst=r, data0=b, data1=a, initial=1.0, op0=nl.add,
                                                   op1=nl.add),
        lambda: 1.0 + np.cumsum(A.astype(np.float64) + B, axis=1),
        lambda a, b, c: lisa.tensor_tensor_scan(b, a, 1.0, np.add, np.add)),
}  # fmt: skip


def _legacy_kernel(op):
    @nki_dsl.jit
    def kernel(a, b, col):
        r = op(lnl.load(a), lnl.load(b), lnl.load(col))
        out = lnl.ndarray(r.shape, lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, r)
        return out

    return kernel


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
@pytest.mark.parametrize("case", list(CASES))
def test_op_matches_numpy_and_its_legacy_twin(case, backend):
    body, formula, legacy = CASES[case]
    kernel = _unary(body)
    got = kernel(A, B, COL) if backend == "numpy" else nki.simulate(kernel)(A, B, COL)
    np.testing.assert_allclose(got, formula(), rtol=2e-6, atol=2e-5)  # fp32 vs float64
    np.testing.assert_array_equal(got, _legacy_kernel(legacy)(A, B, COL))


def test_tensor_reduce_into_a_column_and_activation_reduce():
    @nki.jit
    def kernel(a):
        t = _sbuf(a)
        mx = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx, op=nl.max, data=t, axis=1, negate=True)  # keepdims=False into [P, 1]
        e = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=mx, reduce_op=nl.add, reduce_res=s,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return _out(mx), _out(s)

    mx, s = kernel(A)
    np.testing.assert_array_equal(mx[:, 0], -A.max(axis=1))
    np.testing.assert_allclose(s[:, 0], np.exp(A - A.max(axis=1, keepdims=True)).sum(axis=1), rtol=1e-5)


def test_iota_and_affine_select_causal_mask():
    @nki.jit
    def kernel(a):
        idx = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[1, 64]], offset=5, channel_multiplier=64)
        masked = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        # keep j <= p: p - j >= 0
        nisa.affine_select(dst=masked, pattern=[[-1, 64]], channel_multiplier=1, on_true_tile=_sbuf(a),
                           on_false_value=-9.0, cmp_op=nl.greater_equal)
        return _out(idx), _out(masked)

    idx, masked = kernel(A)
    p, j = np.mgrid[0:128, 0:64]
    np.testing.assert_array_equal(idx, 5 + 64 * p + j)
    np.testing.assert_array_equal(masked, np.where(j <= p, A, -9.0))


def test_nc_transpose_on_both_engines():
    small = A[:32, :32].copy()

    @nki.jit
    def kernel(a, s):
        tp = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=tp, data=_sbuf(a))  # PSUM dst: Tensor engine
        ts = nl.ndarray((64, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ts, src=tp)
        vs = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=vs, data=_sbuf(s))  # small SBUF dst: Vector engine
        return _out(ts), _out(vs)

    t, v = kernel(A, small)
    np.testing.assert_array_equal(t, A.T)
    np.testing.assert_array_equal(v, small.T)
    assert '"vector"' in nki_dsl.trace(kernel, A, small).text


def test_dma_copy_reshapes_a_whole_hbm_tensor_of_the_same_size():
    @nki.jit
    def kernel(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)  # a is [64, 128]: the same 8192 elements, row-major
        return _out(t)

    flat = A.reshape(64, 128).copy()
    np.testing.assert_array_equal(kernel(flat), flat.reshape(128, 64))
