"""Vector-engine elementwise instructions: tensor_tensor, tensor_scalar, scalar_tensor_tensor, tensor_tensor_scan,
tensor_copy, reciprocal and memset, against float64 NumPy formulas rounded once to the result dtype."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.isa.formulas import ALU_FORMULAS, alu
from tests.isa.support import BF16, F16, F32, FLOAT_DTYPES, assert_close, f32, rand, run_tiles

P, F = 128, 96


def _f64(a):
    return f32(a).astype(np.float64)


def _pair(op, dtype):
    a = rand((P, F), dtype, seed=1)
    b = rand((P, F), dtype, *ALU_FORMULAS[op][1], seed=2)
    b[:, ::3] = a[:, ::3]  # some equal elements, so comparisons see both outcomes
    return a, b


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", list(ALU_FORMULAS))
def test_tensor_tensor(op, dtype):
    a, b = _pair(op, dtype)
    got = run_tiles(lambda x, y: nisa.tensor_tensor(x, y, op), a, b)
    assert_close(got, alu(op, _f64(a), _f64(b)), dtype)


def test_tensor_tensor_promotes_bf16_with_fp16_to_fp32():
    # reference/nki.md §2.2: (fp16, bf16) -> fp32; the sum is then not rounded to either narrow type.
    a, b = rand((P, F), BF16, seed=3), rand((P, F), F16, seed=4)
    got = run_tiles(lambda x, y: nisa.tensor_tensor(x, y, np.multiply), a, b)
    assert_close(got, _f64(a) * _f64(b), F32)


def test_tensor_tensor_on_gpsimd_with_a_psum_operand():
    s, m, c = rand((P, 64), seed=5), rand((P, F), seed=6), rand((64, F), BF16, seed=7)

    def body(st, mv, other):
        psum = nisa.nc_matmul(st, mv)
        res = nisa.tensor_tensor(psum, other, nl.subtract, engine=nisa.gpsimd_engine, dtype=nl.bfloat16)
        assert res.buffer == "sbuf"
        return res

    assert_close(run_tiles(body, s, m, c), _f64(s).T @ _f64(m) - _f64(c), BF16)


@pytest.mark.parametrize("op, formula", [
    ("bitwise_and", np.bitwise_and), ("bitwise_xor", np.bitwise_xor), ("right_shift", np.right_shift),
])  # fmt: skip
def test_tensor_tensor_bitwise_ops_on_int32(op, formula):
    rng = np.random.default_rng(8)
    a = rng.integers(0, 2**30, size=(P, F), dtype=np.int32)
    b = rng.integers(0, 2**30 if op != "right_shift" else 8, size=(P, F), dtype=np.int32)
    got = run_tiles(lambda x, y: nisa.tensor_tensor(x, y, op), a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, formula(a.astype(np.int64), b.astype(np.int64)))


def _operand(kind, seed, lo=0.5, hi=2.0):
    """A per-partition operand: a Python number or a [P, 1] tile."""
    return 1.75 if kind == "imm" else rand((P, 1), lo=lo, hi=hi, seed=seed)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op0, reverse0, op1, reverse1", [
    ("multiply", False, None, False),
    ("subtract", True, None, False),
    ("subtract", False, "divide", False),
    ("divide", True, "subtract", True),
    ("maximum", False, "minimum", True),
])  # fmt: skip
@pytest.mark.parametrize("kind", ["imm", "tile"])
def test_tensor_scalar(op0, reverse0, op1, reverse1, kind, dtype):
    data = rand((P, F), dtype, lo=0.5, hi=2.0, seed=9)  # positive: divide in either order is defined
    v0, v1 = _operand(kind, 10), _operand(kind, 11)

    def body(x, t0=None, t1=None):
        o0, o1 = (t0, t1) if kind == "tile" else (v0, v1)
        return nisa.tensor_scalar(x, op0, o0, reverse0, op1, o1 if op1 else None, reverse1)

    got = run_tiles(body, data, *((v0, v1) if kind == "tile" else ()))
    expected = alu(op0, _f64(data), v0, reverse0)
    if op1:
        expected = alu(op1, expected, v1, reverse1)
    assert_close(got, expected, dtype)


@pytest.mark.parametrize("engine", [nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine])
def test_tensor_scalar_runs_on_the_engine_it_names(engine):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_scalar(nl.load(a), np.add, 3.0, engine=engine))
        return out

    a = rand((P, F), BF16, seed=12)
    assert_close(kernel(a), _f64(a) + 3.0, BF16)
    assert f'engine = "{engine.name}"' in str(nki.trace(kernel, a))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("reverse0, reverse1", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kind", ["imm", "tile"])
def test_scalar_tensor_tensor(reverse0, reverse1, kind, dtype):
    data, other = rand((P, F), dtype, 0.5, 2.0, seed=13), rand((P, F), dtype, seed=14)
    v0 = _operand(kind, 15)

    def body(x, y, t0=None):
        o0 = t0 if kind == "tile" else v0
        return nisa.scalar_tensor_tensor(data=x, op0=np.divide, operand0=o0, op1=np.subtract, operand1=y,
                                         reverse0=reverse0, reverse1=reverse1)  # fmt: skip

    got = run_tiles(body, data, other, *((v0,) if kind == "tile" else ()))
    expected = alu("subtract", alu("divide", _f64(data), v0, reverse0), _f64(other), reverse1)
    assert_close(got, expected, dtype)


def _scan(a, b, initial, op0, op1, reverse0=False, reverse1=False):
    """The recurrence r[j] = (a[j] op0 r[j-1]) op1 b[j], r[-1] = initial, along each row, in float64."""
    r = np.empty_like(a)
    prev = np.broadcast_to(np.reshape(initial, (-1,)), (a.shape[0],)).astype(np.float64)
    for j in range(a.shape[1]):
        prev = alu(op1, alu(op0, a[:, j], prev, reverse0), b[:, j], reverse1)
        r[:, j] = prev
    return r


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op0, op1, reverse0, reverse1", [
    ("multiply", "add", False, False),
    ("subtract", "add", True, False),
    ("add", "subtract", False, True),
])  # fmt: skip
@pytest.mark.parametrize("kind", ["imm", "tile"])
def test_tensor_tensor_scan(op0, op1, reverse0, reverse1, kind, dtype):
    a, b = rand((P, F), dtype, 0.0, 0.9, seed=16), rand((P, F), dtype, seed=17)
    init = 0.25 if kind == "imm" else rand((P, 1), seed=18)

    def body(x, y, t=None):
        return nisa.tensor_tensor_scan(x, y, t if kind == "tile" else init, op0, op1, reverse0, reverse1)

    got = run_tiles(body, a, b, *((init,) if kind == "tile" else ()))
    # The carried value is fp32 (only the output is rounded), so a long scan drifts by a few fp32 ulps.
    assert_close(got, _scan(_f64(a), _f64(b), init, op0, op1, reverse0, reverse1), dtype,
                 rtol=None if dtype != F32 else 2e-5)  # fmt: skip


def test_a_tiled_scan_carries_its_last_column_through_a_sequential_loop():
    # reference/nki.md §1.4: the scan tiled along the free axis, each tile starting from the previous tile's end.
    n, tile = 512, 128

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        carry = nl.zeros((P, 1), dtype=nl.float32)
        for t in nl.sequential_range(n // tile):
            r = nisa.tensor_tensor_scan(nl.load(a[:, nl.ds(t * tile, tile)]), nl.load(b[:, nl.ds(t * tile, tile)]),
                                        carry, np.multiply, np.add)  # fmt: skip
            carry[...] = nl.copy(r[:, tile - 1])
            nl.store(out[:, nl.ds(t * tile, tile)], r)
        return out

    a, b = rand((P, n), lo=0.0, hi=0.9, seed=19), rand((P, n), seed=20)
    assert_close(kernel(a, b), _scan(_f64(a), _f64(b), 0.0, "multiply", "add"), F32, rtol=2e-5)


def test_a_masked_scan_runs_over_the_selected_columns_from_initial():
    a, b = rand((P, F), lo=0.0, hi=0.9, seed=21), rand((P, F), seed=22)

    def body(x, y):
        i_p, i_f = nl.mgrid[0:P, 0:F]
        r = nisa.tensor_tensor_scan(x, y, 1.0, np.multiply, np.add, mask=(i_f >= 32))
        out = nl.ndarray((P, F - 32), dtype=nl.float32)
        out[...] = nl.copy(r[:, 32:F])
        return out

    expected = _scan(_f64(a[:, 32:]), _f64(b[:, 32:]), 1.0, "multiply", "add")
    assert_close(run_tiles(body, a, b), expected, F32, rtol=2e-5)


@nki.jit
def _scans_from_a_loop_dependent_column(a, b):
    """Iteration i scans from column 16 + 32i (a mask on the sequential loop's index, which the JAX backend
    traces) and stores those columns into row block i of the result."""
    out = nl.ndarray((2, P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    i_p, i_f = nl.mgrid[0:P, 0:F]
    for i in nl.sequential_range(2):
        r = nisa.tensor_tensor_scan(x, y, 1.0, np.multiply, np.add, mask=(i_f >= 16 + 32 * i))
        nl.store(out[i], value=r, mask=(i_f >= 16 + 32 * i))
    return out


def test_a_scan_masked_by_a_loop_index_starts_at_the_column_of_each_iteration():
    a, b = rand((P, F), lo=0.0, hi=0.9, seed=23), rand((P, F), seed=24)
    got = _scans_from_a_loop_dependent_column(a, b)
    for i in range(2):
        first = 16 + 32 * i
        expected = _scan(_f64(a[:, first:]), _f64(b[:, first:]), 1.0, "multiply", "add")
        assert_close(got[i][:, first:], expected, F32, rtol=2e-5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("out", FLOAT_DTYPES)
def test_tensor_copy_converts_with_round_to_nearest_even(dtype, out):
    a = rand((P, F), dtype, -3, 3, seed=23)
    got = run_tiles(lambda x: nisa.tensor_copy(x, dtype=out), a)
    # Converting once from the exact input value is the whole specification of a copy.
    np.testing.assert_array_equal(f32(got), f32(a).astype(out).astype(F32))
    assert got.dtype == out


def test_tensor_copy_to_int_rounds_half_to_even_and_saturates():
    a = np.array([[0.5, 1.5, 2.5, -2.5, 3.49, 1e10, -1e10, 7.0]] * 4, dtype=F32)
    got = run_tiles(lambda x: nisa.tensor_copy(x, dtype=nl.int32), a)
    info = np.iinfo(np.int32)
    np.testing.assert_array_equal(got, np.clip(np.round(a.astype(np.float64)), info.min, info.max).astype(np.int32))


@pytest.mark.parametrize("engine", [nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine])
def test_tensor_copy_evacuates_psum_to_sbuf_on_each_engine(engine):
    s, m = rand((P, 32), BF16, seed=24), rand((P, F), BF16, seed=25)

    def body(st, mv):
        res = nisa.tensor_copy(nisa.nc_matmul(st, mv), engine=engine, dtype=nl.bfloat16)
        assert res.buffer == "sbuf"
        return res

    assert_close(run_tiles(body, s, m), _f64(s).T @ _f64(m), BF16)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_reciprocal(dtype):
    a = rand((P, F), dtype, 0.25, 4.0, seed=26) * np.where(np.arange(F) % 2, 1, -1).astype(dtype)
    assert_close(run_tiles(lambda x: nisa.reciprocal(x), a), 1.0 / _f64(a), dtype)


@pytest.mark.parametrize("dtype, value", [(nl.float32, 0.1), (nl.bfloat16, -3.3), (nl.float16, 1e-3),
                                          (nl.int32, 7)])  # fmt: skip
@pytest.mark.parametrize("engine", [nisa.vector_engine, nisa.gpsimd_engine])
def test_memset(dtype, value, engine):
    @nki.jit
    def kernel():
        out = nl.ndarray((P, 3, 5), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.memset((P, 3, 5), value, dtype, engine=engine))
        return out

    got = kernel()
    np.testing.assert_array_equal(got, np.full((P, 3, 5), value, dtype=dtype))


def test_memset_under_a_mask_writes_only_the_selected_partitions():
    def body(x):
        i_p = nl.arange(P)[:, None]
        filled = nisa.memset((P, F), 2.0, nl.float32, mask=(i_p < 40))
        x[0:40, :] = nl.copy(filled[0:40, :])
        return x

    a = rand((P, F), seed=27)
    got = run_tiles(body, a)
    np.testing.assert_array_equal(got[:40], 2.0)
    np.testing.assert_array_equal(got[40:], a[40:])
