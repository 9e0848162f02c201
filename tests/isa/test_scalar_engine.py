"""nisa.activation and nisa.activation_reduce: op(data * scale + bias) on the Scalar engine, computed in fp32 and
rounded once to the result dtype, with the fused free-axis reduction into reduce_res."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.ir.ops.isa import ACTIVATIONS
from tests.backend_fixture import backend_independent
from tests.isa.formulas import ACTIVATION_FORMULAS
from tests.isa.support import F32, FLOAT_DTYPES, assert_close, f32, rand, run_tiles

P, F = 128, 64
REDUCE_FORMULAS = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod}


@backend_independent
def test_every_activation_function_has_a_reference_formula():
    # A new activation function must come with an independent formula for the tests below.
    assert set(ACTIVATION_FORMULAS) == set(ACTIVATIONS)


def _inputs(name, dtype, vector_scale):
    """data, scale, bias such that data * scale + bias covers the function's domain."""
    lo, hi = ACTIVATION_FORMULAS[name][1]
    bias = rand((P, 1), lo=-0.25, hi=0.25, seed=2)
    scale = rand((P, 1), lo=0.5, hi=1.5, seed=3) if vector_scale else 0.5
    z = rand((P, F), lo=lo + 0.3 * (hi - lo) / 8, hi=hi - 0.3 * (hi - lo) / 8, seed=1).astype(np.float64)
    data = ((z - bias) / scale).astype(F32).astype(dtype)
    return data, scale, bias


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_with_scalar_scale_and_vector_bias(name, dtype):
    data, scale, bias = _inputs(name, dtype, vector_scale=False)
    got = run_tiles(lambda x, b: nisa.activation(name, x, bias=b, scale=scale), data, bias)
    formula = ACTIVATION_FORMULAS[name][0]
    assert_close(got, formula(f32(data).astype(np.float64) * scale + bias), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["exp", "tanh", "gelu", "log"])
def test_activation_with_per_partition_scale_tile(name, dtype):
    data, scale, bias = _inputs(name, dtype, vector_scale=True)
    got = run_tiles(lambda x, s, b: nisa.activation(getattr(np, name, name), x, bias=b, scale=s), data, scale, bias)
    expected = ACTIVATION_FORMULAS[name][0](f32(data).astype(np.float64) * scale + bias)
    assert_close(got, expected, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_activation_without_bias_and_with_an_output_dtype(dtype):
    data = rand((P, 4, 16), dtype, seed=4)  # 3-D tiles: scale and bias broadcast over every free axis
    got = run_tiles(lambda x: nisa.activation(nl.exp, x, scale=-1.5, dtype=nl.float32), data)
    assert_close(got, np.exp(f32(data).astype(np.float64) * -1.5), F32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("reduce_op", list(REDUCE_FORMULAS))
@pytest.mark.parametrize("fused", [False, True], ids=["activation", "activation_reduce"])
def test_reduction_of_the_fp32_activation_output(reduce_op, dtype, fused):
    data, bias = rand((P, F), dtype, seed=5), rand((P, 1), seed=6)

    def body(x, b):
        acc = nl.ndarray((P, 1), dtype=nl.float32)
        if fused:
            y = nisa.activation_reduce(np.exp, x, bias=b, reduce_op=reduce_op, reduce_res=acc)
        else:
            y = nisa.activation(np.exp, x, bias=b, reduce_op=reduce_op, reduce_res=acc)
        return y, acc

    y, acc = run_tiles(body, data, bias)
    exact = np.exp(f32(data).astype(np.float64) + bias)
    assert_close(y, exact, dtype)
    # The reduction sees the fp32 output, before it is rounded to a narrow result dtype.
    assert_close(acc, REDUCE_FORMULAS[reduce_op](exact, axis=1, keepdims=True), F32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cmd", ["idle", "reset_reduce", "reduce", "reset"])
def test_reduce_cmd_controls_the_accumulator(cmd):
    data, start = rand((P, F), seed=7), rand((P, 1), seed=8)

    def body(x, s):
        acc = nl.ndarray((P, 1), dtype=nl.float32)
        acc[...] = nl.copy(s)
        nisa.activation(nl.tanh, x, reduce_op=np.add, reduce_res=acc, reduce_cmd=getattr(nisa.reduce_cmd, cmd))
        return acc

    row_sum = np.tanh(f32(data).astype(np.float64)).sum(axis=1, keepdims=True)
    expected = {"idle": row_sum, "reset_reduce": row_sum, "reduce": start + row_sum, "reset": np.zeros_like(start)}
    assert_close(run_tiles(body, data, start), expected[cmd], F32, rtol=1e-5, atol=1e-5)


def test_a_free_axis_mask_limits_the_reduction_to_the_selected_columns():
    data = rand((P, F), seed=9)

    def body(x):
        acc = nl.ndarray((P, 1), dtype=nl.float32)
        i_p, i_f = nl.mgrid[0:P, 0:F]
        y = nisa.activation_reduce(nl.exp, x, reduce_op=nl.maximum, reduce_res=acc, mask=(i_f < 40))
        out = nl.zeros((P, 40), dtype=nl.float32)
        out[...] = nl.copy(y[:, 0:40])
        return out, acc

    y, acc = run_tiles(body, data)
    exact = np.exp(f32(data[:, :40]).astype(np.float64))
    assert_close(y, exact, F32)
    assert_close(acc, exact.max(axis=1, keepdims=True), F32)


def _trace_error(body, *arrays):
    @nki.jit
    def kernel(x, y):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, body(nl.load(x), y))
        return out

    with pytest.raises(nki.NkiError) as info:
        kernel(*arrays)
    return str(info.value)


@backend_independent
def test_bias_must_be_a_tile_and_the_error_names_the_op():
    message = _trace_error(lambda x, y: nisa.activation(np.exp, x, bias=0.5), rand((P, F)), None)
    assert "nisa.activation" in message and "'bias'" in message


@backend_independent
def test_scale_tile_must_hold_one_value_per_partition():
    message = _trace_error(lambda x, y: nisa.activation(np.exp, x, scale=nl.load(y)), rand((P, F)), rand((P, 2)))
    assert "nisa.activation" in message and "'scale'" in message and "[128, 1]" in message


@backend_independent
def test_reduce_op_without_reduce_res_is_rejected():
    message = _trace_error(lambda x, y: nisa.activation(np.exp, x, reduce_op=np.add), rand((P, F)), None)
    assert "nisa.activation" in message and "reduce_res" in message


@backend_independent
def test_activation_rejects_data_in_hbm():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.activation(np.exp, x))
        return out

    with pytest.raises(nki.NkiError, match=r"nisa\.activation.*'data'.*hbm"):
        kernel(rand((P, F)))
