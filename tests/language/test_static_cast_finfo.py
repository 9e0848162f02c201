"""``nl.static_cast`` (tiles and scalars) and ``nl.finfo`` (float limits), as legacy NKI kernels use them."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.errors import NkiApiError
from tests.backend_fixture import backend_independent
from tests.language.support import BF16, F16, F32, exact, rand, rounded

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


@nki.jit
def cast_kernel(x, dtype):
    t = nl.static_cast(nl.load(x), dtype)
    out = nl.ndarray(x.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("dtype", [BF16, F16, E4M3], ids=["bf16", "f16", "f8e4m3"])
def test_static_cast_tile_rounds_once_to_nearest_even(dtype):
    x = rand((128, 64), F32, -200.0, 200.0, seed=4)
    got = cast_kernel(x, dtype.name)
    assert got.dtype == dtype
    want = rounded(exact(x), dtype)
    np.testing.assert_array_equal(exact(got), exact(want))


def test_static_cast_widening_is_exact():
    x = rand((128, 32), BF16, -3.0, 3.0, seed=5)
    got = cast_kernel(x, "float32")
    assert got.dtype == F32
    np.testing.assert_array_equal(got, exact(x))


INT_CASES = [(np.int32, [2147483647, -2147483648]), (np.int8, [127, -128]), (np.uint8, [255, 0])]


@pytest.mark.parametrize(("dtype", "saturated"), INT_CASES, ids=["i32", "i8", "u8"])
def test_static_cast_float_to_int_rounds_half_even_and_saturates(dtype, saturated):
    row = np.array([2.5, 3.5, -2.5, -0.5, 1.4999999, 1e10, -1e10, np.nan], np.float32)
    got = cast_kernel(np.tile(row, (128, 1)), np.dtype(dtype).name)
    info = np.iinfo(dtype)
    finite = np.clip(np.rint(exact(row[:7])), info.min, info.max)  # float64 formula: ties to even, then clamp
    want = np.concatenate([finite, [0]]).astype(dtype)  # NaN converts to 0
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.tile(want, (128, 1)))
    assert list(want[5:7]) == saturated


@nki.jit
def cast_psum_kernel(a, b):
    """A matmul result (fp32 in PSUM) cast to bf16 on its way out, as attention kernels do with scores."""
    acc = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
    out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, value=nl.static_cast(acc, nl.bfloat16))
    return out


def test_static_cast_of_a_psum_tile():
    a, b = rand((64, 32), BF16, seed=6), rand((64, 48), BF16, seed=7)
    got = cast_psum_kernel(a, b)
    assert got.dtype == BF16
    exact_product = exact(a).T @ exact(b)
    # fp32 accumulation of 64 products of bf16 values is exact to fp32 rounding; then one rounding to bf16.
    np.testing.assert_allclose(exact(got), exact(rounded(exact_product, BF16)), rtol=2**-7, atol=1e-6)


@backend_independent
def test_static_cast_scalars():
    assert nl.static_cast(0.1, nl.bfloat16) == exact(rounded(0.1, BF16)) == 0.10009765625
    assert nl.static_cast(2.5, nl.int32) == 2 and nl.static_cast(3.5, "int32") == 4
    assert nl.static_cast(1e10, nl.int32) == 2**31 - 1
    assert nl.static_cast(np.float32(70000.0), nl.float16) == np.inf
    assert isinstance(nl.static_cast(np.int64(7), nl.float32), float)


@nki.jit
def cast_hbm_kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, value=nl.static_cast(x, nl.bfloat16))
    return out


@backend_independent
def test_static_cast_of_an_hbm_tensor_names_static_cast():
    with pytest.raises(NkiApiError, match=r"test_static_cast_finfo.py:\d+: nl.static_cast: input_data %x is in 'hbm'"):
        cast_hbm_kernel(rand((128, 8), F32))


@backend_independent
def test_static_cast_rejects_what_is_not_data():
    with pytest.raises(NkiApiError, match=r"nl.static_cast: input_data must be a tile or a Python number, got str"):
        nl.static_cast("1.0", nl.float32)
    with pytest.raises(NkiApiError, match=r"static_cast dtype .*not supported"):
        nl.static_cast(1.0, np.complex64)


# (dtype, bits, mantissa bits, largest finite value, smallest normal exponent): the formats' definitions.
FORMATS = [
    (F32, 32, 23, (2 - 2.0**-23) * 2.0**127, -126),
    (BF16, 16, 7, (2 - 2.0**-7) * 2.0**127, -126),
    (F16, 16, 10, (2 - 2.0**-10) * 2.0**15, -14),
    (E4M3, 8, 3, 1.75 * 2.0**8, -6),  # e4m3fn: no infinities, the top mantissa pattern of the top exponent is NaN
    (E5M2, 8, 2, 1.75 * 2.0**15, -14),
]


@pytest.mark.parametrize(("dtype", "bits", "nmant", "largest", "min_exp"), FORMATS, ids=lambda v: str(v))
@backend_independent
def test_finfo_fields_match_the_format(dtype, bits, nmant, largest, min_exp):
    info = nl.finfo(dtype)
    assert info.dtype == dtype and info.bits == bits and info.nmant == nmant
    assert info.max == largest and info.min == -largest
    assert info.eps == 2.0**-nmant
    assert info.tiny == info.smallest_normal == 2.0**min_exp
    assert info.smallest_subnormal == 2.0 ** (min_exp - nmant)
    assert all(isinstance(getattr(info, f), float) for f in ("max", "min", "eps", "tiny"))
    assert nl.finfo(dtype.name) == info  # by name too


@backend_independent
def test_finfo_rejects_integer_dtypes():
    with pytest.raises(NkiApiError, match="int32 is not a floating-point dtype"):
        nl.finfo(nl.int32)


@nki.jit
def masked_max_kernel(x):
    """A running maximum initialised with ``nl.finfo(dtype).min``, the legacy kernels' masking value."""
    m = nl.full((128, 1), nl.finfo(nl.bfloat16).min, dtype=nl.bfloat16)
    m[...] = nl.maximum(m, nl.max(nl.load(x), axis=1, keepdims=True))
    out = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, value=m)
    return out


def test_finfo_min_in_a_kernel():
    x = rand((128, 16), BF16, -3e38, -1e38, seed=8)
    np.testing.assert_array_equal(exact(masked_max_kernel(x)), exact(x).max(axis=1, keepdims=True))
