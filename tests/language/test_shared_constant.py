"""``nl.shared_constant``: compile-time data in an HBM tensor, converted to ``dtype`` once, carried in the IR."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.language.support import BF16, F32, assert_ulps, exact, rand, rounded


@nki.jit
def identity_matmul_kernel(x):
    """x.T through a matmul with a constant identity (the transpose idiom of legacy kernels)."""
    ident = nl.load(nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.bfloat16))
    out = nl.ndarray((x.shape[1], 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.matmul(nl.load(x), ident, transpose_x=True))
    return out


def test_identity_constant():
    x = rand((128, 64), BF16, seed=1)
    np.testing.assert_array_equal(identity_matmul_kernel(x), exact(x).T)


TABLE = np.linspace(-3.0, 3.0, 128 * 16).reshape(128, 16)  # float64: more bits than any tile dtype


@nki.jit
def table_kernel(x, dtype):
    table = nl.shared_constant(TABLE, dtype=dtype) if dtype else nl.shared_constant(TABLE)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(x), nl.load(table), dtype=nl.float32))
    return out


@pytest.mark.parametrize("dtype", [None, "bfloat16", "float16"])
def test_constant_rounds_once_to_dtype(dtype):
    x = np.zeros((128, 16), F32)
    got = table_kernel(x, dtype)
    stored = rounded(TABLE, dtype or F32)  # float64 data is held as fp32 when no dtype is given
    assert_ulps(got, exact(stored), F32, ulps=0, what="shared_constant")


def test_constant_survives_ir_text():
    # The data is part of the IR: printing and parsing back reproduces the kernel, and it runs from the text.
    x = np.zeros((128, 16), F32)
    ir = nki.parse_ir(nki.trace(table_kernel, x, "bfloat16").text).ir
    from nki_dsl.backends.numpy_ref import compile_kernel

    np.testing.assert_array_equal(compile_kernel(ir).run({"x": x}), table_kernel(x, "bfloat16"))


@nki.jit
def int_constant_kernel(x):
    lut = nl.load(nl.shared_constant(np.arange(128 * 8).reshape(128, 8)))  # int64 data: int32 tensor
    out = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, value=lut + nl.load(x))
    return out


def test_integer_constant():
    x = np.full((128, 8), 5, np.int32)
    got = int_constant_kernel(x)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.arange(128 * 8).reshape(128, 8) + 5)
