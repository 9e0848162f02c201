"""The JAX backend's numerics rules against the NumPy reference: every op lowered, fresh memory poisoned, fp32
PSUM accumulation, rounding to the tile dtype on write, saturating float->int conversion, masked ragged tiles,
one XLA compilation per specialisation. (The op families themselves run on both backends through the
``kernel_backend`` fixture of tests/language, tests/isa, tests/kernels and tests/tutorials.)"""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl import backends
from nki_dsl.backends.jax import executables
from nki_dsl.ir.ops import OPS

jax_backend = backends.load("jax")
BF16 = np.dtype(ml_dtypes.bfloat16)


def both(kernel, *args, **kwargs):
    return np.asarray(kernel(*args, **kwargs)), np.asarray(kernel(*args, backend="jax", **kwargs))


def test_every_op_of_the_table_has_a_jax_lowering():
    assert set(jax_backend.HANDLERS) == set(OPS)


@nki.jit
def _reads_unwritten(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    ints = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32)  # never written
    t[:, 0:4] = nl.load(x[:, 0:4])
    nl.store(out, value=t)
    nl.store(ints, value=nl.ndarray((128, 8), dtype=nl.int32))
    return out, ints


def test_fresh_memory_reads_as_poison_like_the_reference():
    x = np.ones((128, 8), np.float32)
    (ref, ref_i), (got, got_i) = _reads_unwritten(x), _reads_unwritten(x, backend="jax")
    assert np.isnan(np.asarray(got)[:, 4:]).all() and (np.asarray(got)[:, :4] == 1).all()
    assert (np.asarray(got_i) == np.iinfo(np.int32).min).all()
    np.testing.assert_array_equal(np.asarray(got), ref)
    np.testing.assert_array_equal(np.asarray(got_i), ref_i)


@nki.jit
def _bf16_matmul(lhsT, rhs):
    K, M = lhsT.shape
    out = nl.ndarray((M, rhs.shape[1]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    acc = nl.zeros((M, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc += nl.matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]),
                         transpose_x=True)  # fmt: skip
    nl.store(out, value=nl.copy(acc, dtype=nl.bfloat16))
    return out


def test_psum_accumulates_in_fp32_and_the_store_rounds_once_to_bf16():
    # Small integers: every product and partial sum is exact in fp32 (whatever order XLA sums in), but the
    # totals need more than bf16's 8 bits, so a bf16 accumulator or a second rounding would show.
    rng = np.random.default_rng(0)
    lhsT = rng.integers(-16, 16, (512, 64)).astype(BF16)
    rhs = rng.integers(-16, 16, (512, 32)).astype(BF16)
    ref, got = both(_bf16_matmul, lhsT, rhs)
    exact = (lhsT.astype(np.float64).T @ rhs.astype(np.float64)).astype(np.float32).astype(BF16)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, exact)


@nki.jit
def _convert(x):
    i8 = nl.ndarray(x.shape, dtype=nl.int8, buffer=nl.shared_hbm)
    i32 = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    u8 = nl.ndarray(x.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(i8, value=nl.copy(t, dtype=nl.int8))
    nl.store(i32, value=nl.copy(t, dtype=nl.int32))
    nl.store(u8, value=nl.copy(t, dtype=nl.uint8))
    return i8, i32, u8


def test_float_to_int_rounds_to_nearest_even_saturates_and_takes_nan_to_zero():
    values = [0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 127.6, -128.6, 300.0, -300.0, 3e9, -3e9, np.nan, np.inf, -np.inf,
              2147483520.0, 2147483648.0]  # fmt: skip
    x = np.zeros((1, 32), np.float32)
    x[0, : len(values)] = values
    ref = _convert(x)
    got = _convert(x, backend="jax")
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(np.asarray(g), r)


@nki.jit
def _ragged_rows(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        i_f = nl.arange(cols)[None, :]
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        acc = nl.ndarray((128, 1), dtype=nl.float32)
        y = nisa.activation(np.exp, tile, reduce_op=np.add, reduce_res=acc, mask=(i_p < rows))
        nl.store(out[i_p, i_f], value=nl.multiply(y, acc, mask=(i_p < rows)), mask=(i_p < rows) & (i_f < cols - 1))
    return out


def test_a_ragged_last_tile_under_masks_matches_the_reference():
    x = np.random.default_rng(1).standard_normal((300, 48)).astype(np.float32)
    ref, got = both(_ragged_rows, x)
    assert np.isnan(got[:, -1]).all()  # the store's mask leaves the last column unwritten: poison
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=0)  # XLA's exp and sum: ulps from NumPy's


def test_a_kernel_compiles_once_per_specialisation():
    x = np.ones((128, 8), np.float32)
    jitted = nki.jit(_reads_unwritten.fn)
    before = executables.compilations
    jitted(x, backend="jax")
    jitted(x + 1, backend="jax")
    assert len([k for k in jitted._compiled if k[1] == "jax"]) == 1
    assert executables.compilations == before + 1  # one trace, one XLA executable
    jitted(np.ones((128, 16), np.float32), backend="jax")  # a new shape is a new specialisation
    assert len([k for k in jitted._compiled if k[1] == "jax"]) == 2
    assert executables.compilations == before + 2


def test_compiled_programs_are_bounded_and_an_evicted_one_compiles_again(monkeypatch):
    monkeypatch.setattr(executables, "MAX_EXECUTABLES", 2)
    executables.clear()
    jitted = nki.jit(_reads_unwritten.fn)
    shapes = [(128, 8), (128, 16), (128, 24)]
    results = [np.asarray(jitted(np.full(s, 2.0, np.float32), backend="jax")[0]) for s in shapes]
    assert executables.count() == 2  # the first shape's program was dropped
    before = executables.compilations
    again = np.asarray(jitted(np.full(shapes[0], 2.0, np.float32), backend="jax")[0])
    assert executables.compilations == before + 1
    np.testing.assert_array_equal(again, results[0])


def test_emit_shows_the_jaxpr_handed_to_xla():
    x = np.ones((300, 48), np.float32)
    text = nki.emit(_ragged_rows, x, backend="jax")
    # the tiles are independent: one batched computation over them (the rows padded to 3 * 128), not a loop
    assert "while" not in text and "scan" not in text
    assert "exp" in text and "f32[3,128,48]" in text


def test_dropout_draws_jax_numbers_with_the_reference_distribution():
    @nki.jit
    def drop(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.dropout(nl.load(x), 0.25))
        return out

    x = np.ones((128, 512), np.float32)
    got = np.asarray(drop(x, backend="jax"))
    assert set(np.unique(got)) <= {0.0, 1.0}
    assert abs((got == 0).mean() - 0.25) < 0.01  # 65536 draws: 5 standard deviations is 0.0085
    np.testing.assert_array_equal(np.asarray(drop(x, backend="jax")), got)  # reproducible launch to launch


def test_an_unknown_backend_is_refused_with_the_available_ones():
    with pytest.raises(nki.NkiError, match="unknown backend 'cuda'"):
        _ragged_rows(np.ones((128, 8), np.float32), backend="cuda")
    assert "jax" in nki.backend_names()


@nki.jit
def _doubles_in_place(x):
    nl.store(x, value=nl.multiply(nl.load(x), 2.0))  # writes its parameter, returns nothing


def test_a_kernel_writing_its_parameter_updates_the_callers_numpy_array_like_the_reference():
    ref = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    got = ref.copy()
    assert _doubles_in_place(ref) is None and _doubles_in_place(got, backend="jax") is None
    np.testing.assert_array_equal(got, ref)
    assert ref[1, 0] == 8.0


@nki.jit
def _row_extrema(x):
    out = nl.ndarray((x.shape[0], x.shape[1], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(x.shape[0]):
        t = nl.load(x[b])
        nl.store(out[b, :, 0:1], value=nl.max(t, axis=1, keepdims=True))
        nl.store(out[b, :, 1:2], value=nl.min(t, axis=1, keepdims=True))
    return out


def test_max_and_min_reductions_propagate_nan_as_the_reference_does():
    # [2, 128, 512] is the layout in which XLA's CPU max-reduce turned all-NaN rows into -inf (functions.py)
    x = np.full((2, 128, 512), np.nan, np.float32)
    x[0, :, 3] = 1.0  # one finite element in a NaN row: still NaN
    x[1, 5] = np.linspace(-3, 3, 512, dtype=np.float32)
    x[1, 5, 0], x[1, 5, 7] = np.inf, -np.inf  # infinities but no NaN: +inf and -inf
    x[1, 6] = 2.0
    ref, got = both(_row_extrema, x)
    np.testing.assert_array_equal(got, ref)
    assert np.isnan(got[0]).all() and np.isnan(got[1, 7:]).all()
    assert list(got[1, 5]) == [np.inf, -np.inf] and list(got[1, 6]) == [2.0, 2.0]


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("axis, keepdims", [((1,), True), ((0, 1), False), ((-1,), False)])
def test_the_nan_propagating_extrema_differentiate_and_batch_like_the_plain_ones(name, axis, keepdims):
    import jax
    import jax.numpy as jnp

    from nki_dsl.backends.jax.functions import REDUCTIONS

    ours, plain = REDUCTIONS[name], {"maximum": jnp.max, "minimum": jnp.min}[name]
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    got = jax.grad(lambda v: (ours(v, axis, keepdims) ** 2).sum())(x)
    want = jax.grad(lambda v: (plain(v, axis=axis, keepdims=keepdims) ** 2).sum())(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    batched = jax.vmap(lambda v: ours(v, axis, keepdims))(jnp.stack([x, -x]))
    np.testing.assert_array_equal(np.asarray(batched[1]), np.asarray(plain(-x, axis=axis, keepdims=keepdims)))
