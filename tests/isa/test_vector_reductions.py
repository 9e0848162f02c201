"""Vector-engine reductions and statistics: tensor_reduce, tensor_scalar_reduce, bn_stats and bn_aggr, against
float64 NumPy reductions rounded once to the result dtype."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.formulas import alu
from tests.isa.support import F32, FLOAT_DTYPES, assert_close, f32, rand, run_tiles

P = 128
REDUCTIONS = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}


def _f64(a):
    return f32(a).astype(np.float64)


def _data(shape, op, dtype, seed):
    # Products of many factors stay in the normal fp32 range only for factors near 1.
    lo, hi = (0.8, 1.2) if op == "multiply" else (-1.0, 2.0)
    return rand(shape, dtype, lo, hi, seed=seed)


# A sum of ~100 fp32 terms is off the float64 sum by a few fp32 ulps of the largest term.
ATOL = {np.dtype(F32): 1e-5}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("shape, axis", [((P, 96), 1), ((P, 6, 16), (1, 2)), ((P, 6, 16), 2), ((P, 6, 16), -2)])
@pytest.mark.parametrize("negate, keepdims", [(False, False), (True, True)])
def test_tensor_reduce(op, shape, axis, negate, keepdims, dtype):
    data = _data(shape, op, dtype, seed=1)
    got = run_tiles(lambda x: nisa.tensor_reduce(op, x, axis, negate=negate, keepdims=keepdims), data)
    expected = REDUCTIONS[op](_f64(data), axis=axis, keepdims=keepdims) * (-1 if negate else 1)
    if expected.ndim < 2:  # an on-chip tile keeps a free axis: reducing all of them gives [P, 1]
        expected = expected.reshape(P, 1)
    assert got.shape == expected.shape
    assert_close(got, expected, dtype, atol=ATOL.get(np.dtype(dtype)))


def test_tensor_reduce_negated_max_is_the_bias_for_a_stable_softmax():
    # The SD-attention pattern (reference/nki.md §4.2a): -max per row feeds activation(exp, bias=-max).
    data = rand((P, 256), seed=2, lo=-20, hi=20)

    def body(x):
        neg_max = nisa.tensor_reduce(np.max, x, axis=1, negate=True, keepdims=True, dtype=nl.float32)
        return nisa.activation(np.exp, x, bias=neg_max)

    expected = np.exp(_f64(data) - _f64(data).max(axis=1, keepdims=True))
    assert_close(run_tiles(body, data), expected, F32)


@pytest.mark.parametrize("op, formula", [("bitwise_or", np.bitwise_or.reduce), ("bitwise_and", np.bitwise_and.reduce)])
def test_tensor_reduce_bitwise_on_int32(op, formula):
    # Few columns, so neither reduction saturates to all-zero or all-one bits.
    a = np.random.default_rng(3).integers(0, 2**31 - 1, size=(P, 3), dtype=np.int32)
    got = run_tiles(lambda x: nisa.tensor_reduce(op, x, axis=1), a)
    np.testing.assert_array_equal(got, formula(a, axis=1, keepdims=True))


@pytest.mark.parametrize("op, formula", [("maximum", np.max), ("minimum", np.min)])
def test_tensor_reduce_max_and_min_on_int32_reduce_each_row_exactly(op, formula):
    # Integers take the plain reduction (no NaN to propagate), over the named axis only: each row its own extremum.
    a = np.random.default_rng(4).integers(-(2**31), 2**31 - 1, size=(P, 7), dtype=np.int32)
    got = run_tiles(lambda x: nisa.tensor_reduce(op, x, axis=1), a)
    np.testing.assert_array_equal(got, formula(a, axis=1, keepdims=True))
    assert len(np.unique(got)) > 1


@backend_independent
def test_tensor_reduce_rejects_the_partition_axis_and_names_the_op():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((1, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_reduce(np.add, nl.load(a), axis=0, keepdims=True))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.tensor_reduce.*partition axis 0.*tensor_partition_reduce"):
        kernel(rand((P, 64)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op0, reverse0, reduce_op", [
    ("multiply", False, "add"), ("subtract", True, "maximum"), ("divide", False, "minimum"),
    ("add", False, "multiply"),
])  # fmt: skip
@pytest.mark.parametrize("kind", ["imm", "tile"])
def test_tensor_scalar_reduce(op0, reverse0, reduce_op, kind, dtype):
    data = rand((P, 64), dtype, 0.5, 1.5, seed=4) if reduce_op != "multiply" else rand((P, 64), dtype, -0.2, 0.2)
    v = 0.75 if kind == "imm" else rand((P, 1), lo=0.5, hi=1.5, seed=5)

    def body(x, t=None):
        acc = nl.ndarray((P, 1), dtype=nl.float32)
        y = nisa.tensor_scalar_reduce(data=x, op0=op0, operand0=t if kind == "tile" else v, reverse0=reverse0,
                                      reduce_op=reduce_op, reduce_res=acc)  # fmt: skip
        return y, acc

    y, acc = run_tiles(body, data, *((v,) if kind == "tile" else ()))
    exact = alu(op0, _f64(data), v, reverse0)
    assert_close(y, exact, dtype)
    # The reduction reads the fp32 elementwise result, before rounding to the result dtype.
    expected = np.asarray(REDUCTIONS[reduce_op](exact, axis=1, keepdims=True))
    assert_close(acc, expected, F32, rtol=1e-5, atol=1e-5)


def _stats(x):
    """(count, mean, count * population variance) of the even-, then the odd-indexed elements of each row."""
    x = _f64(x).reshape(x.shape[0], -1)
    out = []
    for part in (x[:, 0::2], x[:, 1::2]):
        n = part.shape[1]
        out += [np.full(x.shape[0], n), part.mean(axis=1), n * part.var(axis=1)]
    return np.stack(out, axis=1)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(P, 512), (P, 63), (64, 4, 32)])
def test_bn_stats_layout(shape, dtype):
    data = rand(shape, dtype, -2, 3, seed=6)
    got = run_tiles(lambda x: nisa.bn_stats(x, dtype=nl.float32), data)
    assert_close(got, _stats(data), F32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_bn_stats_result_defaults_to_the_data_dtype(dtype):
    data = rand((P, 100), dtype, -2, 3, seed=7)
    assert_close(run_tiles(lambda x: nisa.bn_stats(x), data), _stats(data), dtype, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("chunks", [1, 4])
def test_bn_aggr_of_concatenated_bn_stats_is_the_mean_and_variance(chunks, dtype):
    # Layer-norm statistics of a row wider than bn_stats reads, as NKI's layernorm tutorial combines them.
    width = 512
    data = rand((P, chunks * width), dtype, -1, 4, seed=8)

    @nki.jit
    def kernel(a):
        out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32)
        for c in nl.affine_range(chunks):
            stats[:, nl.ds(6 * c, 6)] = nisa.bn_stats(nl.load(a[:, nl.ds(c * width, width)]), dtype=nl.float32)
        nl.store(out, nisa.bn_aggr(stats))
        return out

    got = kernel(data)
    x = _f64(data)
    expected = np.stack([x.mean(axis=1), x.var(axis=1)], axis=1)
    assert_close(got, expected, F32, rtol=1e-5, atol=1e-5)


def _trace_error(body, data):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, body(nl.load(a)))
        return out

    with pytest.raises(nki.NkiError) as info:
        kernel(data)
    return str(info.value)


@backend_independent
def test_bn_stats_reads_at_most_bn_stats_fmax_elements_per_partition():
    message = _trace_error(lambda x: nisa.bn_aggr(nisa.bn_stats(x)), rand((P, 1024)))
    assert "nisa.bn_stats" in message and "512" in message and "bn_aggr" in message


@backend_independent
def test_bn_aggr_needs_count_mean_m2_triples():
    message = _trace_error(lambda x: nisa.bn_aggr(x), rand((P, 5)))
    assert "nisa.bn_aggr" in message and "[P, 3*k]" in message
