"""Tensor creation (ndarray, zeros, ones, full, the *_like forms), poison in unwritten memory, and the dtype
limits ``nl.fp32.min`` and friends."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.language.support import BF16, F16, F32, exact, rand, rounded


@nki.jit
def fill_kernel(how, value, dtype):
    shape = (128, 16)
    if how == "zeros":
        t = nl.zeros(shape, dtype=dtype)
    elif how == "ones":
        t = nl.ones(shape, dtype=dtype, buffer=nl.sbuf)
    elif how == "full":
        t = nl.full(shape, value, dtype=dtype)
    else:  # a PSUM tile, copied out
        t = nl.copy(nl.full(shape, value, dtype=dtype, buffer=nl.psum))
    out = nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


FILLS = [("zeros", 0.0), ("ones", 1.0), ("full", 0.1), ("full", -3.3e5), ("full_psum", 2.0 / 3.0)]
DTYPES = (F32, BF16, F16, np.dtype(np.int32))
# PSUM holds float accumulations only. Integers beyond fp32's 24 bits must not pass through fp32.
FILL_CASES = [(h, v, d) for h, v in FILLS for d in DTYPES if d.kind == "f" or h != "full_psum"]
FILL_CASES += [("full", 16777217, np.dtype(np.int32)), ("full", 2**31 - 1, np.dtype(np.int32))]


@pytest.mark.parametrize(("how", "value", "dtype"), FILL_CASES, ids=[f"{h}({v:g})-{d.name}" for h, v, d in FILL_CASES])
def test_fills(how, value, dtype):
    got = fill_kernel(how, value, dtype.name)
    # The constant as the dtype holds it: rounded once (fp16 overflows to inf), ints to nearest.
    want = np.rint(value).astype(dtype) if dtype.kind == "i" else rounded(value, dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.full((128, 16), want, dtype))


@nki.jit
def like_kernel(x, how):
    t = nl.load(x)
    if how == "zeros_like":
        r = nl.zeros_like(t)
    elif how == "ones_like":
        r = nl.ones_like(t, dtype=nl.float32)
    elif how == "full_like":
        r = nl.full_like(t, 7.0)
    else:
        r = nl.empty_like(t)  # never written: poison
    out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=r)
    return out


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.int16)], ids=["bf16", "i16"])
@pytest.mark.parametrize("how", ["zeros_like", "ones_like", "full_like", "empty_like"])
def test_like(how, dtype):
    x = (rand((128, 8), F32, -100, 100, seed=1)).astype(dtype)
    got = like_kernel(x, how)
    dt = F32 if how == "ones_like" else dtype
    assert got.shape == x.shape and got.dtype == dt
    if how == "empty_like":
        _assert_poison(got)
    else:
        np.testing.assert_array_equal(got, np.full(x.shape, {"zeros_like": 0, "ones_like": 1, "full_like": 7}[how]))


def _assert_poison(a):
    """Unwritten memory reads as NaN for floats and as the most negative value for integers, never as zero."""
    if a.dtype.kind == "i":
        assert (a == np.iinfo(a.dtype).min).all()
    else:
        assert np.isnan(exact(a)).all()


@nki.jit
def unwritten_kernel(x, dtype, buffer):
    t = nl.ndarray(x.shape, dtype=dtype, buffer=nl.psum if buffer == "psum" else nl.sbuf)
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    # Arithmetic on poison stays poison: adding real data does not hide it.
    summed = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(summed, value=nl.add(t, nl.load(x), dtype=nl.float32))
    return out, summed


@pytest.mark.parametrize(("dtype", "buffer"), [(F32, "sbuf"), (BF16, "sbuf"), (F32, "psum"), (np.int32, "sbuf")])
def test_unwritten_memory_is_poison(dtype, buffer):
    out, summed = unwritten_kernel(np.ones((128, 8), F32), np.dtype(dtype).name, buffer)
    _assert_poison(out)
    if np.dtype(dtype).kind == "f":
        assert np.isnan(summed).all()


@nki.jit
def unwritten_output_kernel(x):
    out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[:, 0:8], value=nl.load(x))  # half the output is never written
    return out


def test_unwritten_output_is_poison():
    x = rand((128, 8), F32, seed=2)
    got = unwritten_output_kernel(x)
    np.testing.assert_array_equal(got[:, :8], x)
    _assert_poison(got[:, 8:])


def _from_bits(bits, uint, dtype):
    return np.array([bits], dtype=uint).view(dtype)[0].item()


@backend_independent
def test_float_limits():
    # nki.md §2.2 gives nl.fp32.min as the bit pattern 0xff7fffff and nl.bfp16.min as 0xff80... (bf16 -max).
    assert nl.fp32.min == _from_bits(0xFF7FFFFF, np.uint32, np.float32)
    assert nl.bfp16.min == nl.bf16.min == _from_bits(0xFF7F, np.uint16, ml_dtypes.bfloat16)
    assert nl.fp16.min == -65504.0
    for limits, dtype in [(nl.fp32, F32), (nl.bf16, BF16), (nl.fp16, F16)]:
        assert limits.max == -limits.min == float(ml_dtypes.finfo(dtype).max)


@nki.jit
def running_max_init_kernel(x):
    """``nl.fp32.min`` as the identity of a running maximum: any finite input replaces it."""
    m = nl.full((128, 1), nl.fp32.min, dtype=nl.float32)
    m[...] = nl.maximum(m, nl.max(nl.load(x), axis=1, keepdims=True))
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=m)
    return out


def test_fp32_min_in_a_kernel():
    x = rand((128, 32), F32, -1e30, -1e29, seed=3)
    np.testing.assert_array_equal(running_max_init_kernel(x), x.max(axis=1, keepdims=True))


@nki.jit
def lazy_kernel(x, lazy):
    """Legacy kernels pass ``lazy_initialization``; the tensors are filled either way, so a partial write leaves
    the fill value in the rest (never poison)."""
    acc = nl.zeros((128, 16), dtype=nl.float32, lazy_initialization=lazy)
    big = nl.full((128, 16), -7.5, dtype=nl.float32, lazy_initialization=lazy)
    one = nl.ones((128, 16), dtype=nl.float32, lazy_initialization=lazy)
    scratch = nl.ndarray((128, 16), dtype=nl.float32, lazy_initialization=lazy)
    acc[:, 0:8] = nl.load(x)
    scratch[...] = nl.add(big, one)
    out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(acc, scratch))
    return out


@pytest.mark.parametrize("lazy", [True, False])
def test_lazy_initialization_still_initialises(lazy):
    x = rand((128, 8), F32, seed=4)
    got = lazy_kernel(x, lazy)
    want = np.full((128, 16), -6.5)
    want[:, :8] += exact(x)
    np.testing.assert_array_equal(got, rounded(want, F32))


@backend_independent
def test_lazy_initialization_must_be_a_bool():
    with pytest.raises(nki.NkiApiError, match=r"test_creation.py:\d+: nl.zeros: lazy_initialization= must be True"):
        lazy_kernel(rand((128, 8), F32), "yes")
