"""The convenience wrappers of the current ``nki.language`` (reference/nki.md §2.6: math, activations, reductions,
comparisons, logical and bitwise ops, creation, movement, composites, buffers, dtypes, ``tile_size``) called inside
current-API kernels (``nl.ndarray`` tiles written by ``nisa`` instructions), on the NumPy reference and the
simulator, against the float64 formulas of the legacy tests of the same functions. The wrappers are the legacy
front end's functions; what these tests add is that they work on the current API's tensors, in its
specialisation."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from tests.current_api.kernel_io import out as _out
from tests.current_api.kernel_io import sbuf as _sbuf
from tests.language.support import F32, assert_ulps, exact, rand
from tests.language.test_binary import BINARY
from tests.language.test_compare_logical_bitwise import BITWISE, COMPARISONS, LOGICAL
from tests.language.test_reductions import REDUCTIONS
from tests.language.test_unary import UNARY

UNARY_OPS = [
    nl.abs, nl.arctan, nl.ceil, nl.cos, nl.exp, nl.floor, nl.log, nl.negative, nl.reciprocal, nl.rsqrt, nl.sign,
    nl.sin, nl.sqrt, nl.square, nl.tan, nl.tanh, nl.trunc,
    nl.relu, nl.sigmoid, nl.gelu, nl.gelu_dx, nl.gelu_apprx_tanh, nl.gelu_apprx_sigmoid, nl.silu, nl.silu_dx,
    nl.erf, nl.erf_dx, nl.softplus, nl.mish,
]  # fmt: skip
BINARY_OPS = [nl.add, nl.subtract, nl.multiply, nl.divide, nl.maximum, nl.minimum, nl.power, nl.mod, nl.fmod]
REDUCTION_OPS = [nl.sum, nl.max, nl.min, nl.mean, nl.prod, nl.var]
COMPARISON_OPS = [nl.equal, nl.not_equal, nl.greater, nl.greater_equal, nl.less, nl.less_equal]
LOGICAL_OPS = [nl.logical_and, nl.logical_or, nl.logical_xor]
BITWISE_OPS = [nl.bitwise_and, nl.bitwise_or, nl.bitwise_xor, nl.left_shift, nl.right_shift]




@nki.jit
def apply(x, y=None, fn=None):
    """``fn`` of the inputs' SBUF tiles, stored."""
    return _out(fn(_sbuf(x)) if y is None else fn(_sbuf(x), _sbuf(y)))


def run(kernel, backend, *args, **kwargs):
    return kernel(*args, **kwargs) if backend == "numpy" else nki.simulate(kernel)(*args, **kwargs)


BACKENDS = pytest.mark.parametrize("backend", ["numpy", "simulator"])


def _ids(ops):
    return [op.__name__ for op in ops]


def _shifted(x):
    """``x + pi/2`` as the engine program adds it, in fp32 (passes/lower_math.py: cos and tan go through sin)."""
    return exact(x.astype(np.float32) + np.float32(np.pi / 2))


# On the simulator, which runs the engine program, cos x is sin(x + pi/2) and tan x is sin x / sin(x + pi/2), with
# x + pi/2 rounded to fp32 first: the formula is that program's, in float64.
ENGINE_FORMULAS = {"cos": lambda x: np.sin(_shifted(x)), "tan": lambda x: np.sin(exact(x)) / np.sin(_shifted(x))}


@pytest.mark.parametrize("op", UNARY_OPS, ids=_ids(UNARY_OPS))
@BACKENDS
def test_unary_wrapper(op, backend):
    formula, (lo, hi, signed), ulps, eps = UNARY[op.__name__]
    if backend == "simulator" and op.__name__ in ENGINE_FORMULAS:
        formula = lambda x: ENGINE_FORMULAS[op.__name__](x.astype(np.float32))  # noqa: E731
    x = rand((128, 48), F32, lo, hi, seed=len(op.__name__), signed=signed)
    got = run(apply, backend, x, fn=op)
    assert_ulps(got, formula(exact(x)), F32, ulps=ulps, atol=eps * 2.0**-23, what=f"nl.{op.__name__}")


@pytest.mark.parametrize("op", BINARY_OPS, ids=_ids(BINARY_OPS))
@BACKENDS
def test_binary_wrapper(op, backend):
    formula, x_dom, y_dom = BINARY[op.__name__]
    x, y = (rand((128, 40), F32, lo, hi, seed=s, signed=sg) for (lo, hi, sg), s in ((x_dom, 1), (y_dom, 2)))
    ulps = 4 if op is nl.power else 1
    got = run(apply, backend, x, y, fn=op)
    assert_ulps(got, formula(exact(x), exact(y)), F32, ulps=ulps, what=f"nl.{op.__name__}")


@pytest.mark.parametrize("op", REDUCTION_OPS, ids=_ids(REDUCTION_OPS))
@BACKENDS
def test_reduction_wrapper(op, backend):
    formula, (lo, hi) = REDUCTIONS[op.__name__]
    x = rand((128, 64), F32, lo, hi, seed=3)
    got = run(apply, backend, x, fn=lambda t: op(t, axis=1, keepdims=True))
    want = formula(exact(x), axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=2e-5 if op is nl.prod else 1e-5, atol=1e-5)


@BACKENDS
def test_all_reduces_a_boolean_tile(backend):
    x = np.ones((128, 16), np.bool_)
    x[5, 3] = False
    got = run(apply, backend, x, fn=lambda t: nl.all(t, axis=1, keepdims=True))
    np.testing.assert_array_equal(got[:, 0], x.all(axis=1))


@pytest.mark.parametrize("op", COMPARISON_OPS + LOGICAL_OPS, ids=_ids(COMPARISON_OPS + LOGICAL_OPS))
@BACKENDS
def test_comparison_and_logical_wrapper(op, backend):
    rng = np.random.default_rng(5)
    x, y = (rng.integers(0, 3, (128, 32)).astype(np.float32) for _ in range(2))
    formula = (COMPARISONS | LOGICAL)[op.__name__]
    np.testing.assert_array_equal(run(apply, backend, x, y, fn=op), formula(x, y))
    np.testing.assert_array_equal(run(apply, backend, x, fn=nl.logical_not), np.logical_not(x))


@pytest.mark.parametrize("op", BITWISE_OPS, ids=_ids(BITWISE_OPS))
@BACKENDS
def test_bitwise_wrapper(op, backend):
    rng = np.random.default_rng(6)
    x, y = rng.integers(0, 64, (128, 32)).astype(np.int32), rng.integers(0, 5, (128, 32)).astype(np.int32)
    want = np.vectorize(BITWISE[op.__name__])(x.astype(object), y.astype(object)).astype(np.int32)
    np.testing.assert_array_equal(run(apply, backend, x, y, fn=op), want)
    np.testing.assert_array_equal(run(apply, backend, x, fn=nl.invert), ~x)


@BACKENDS
def test_creation_wrappers(backend):
    @nki.jit
    def k(x):
        t = _sbuf(x)
        z, o = nl.zeros((128, 8), nl.float32, buffer=nl.sbuf), nl.ones((128, 8), nl.float32, buffer=nl.sbuf)
        f = nl.full((128, 8), 2.5, nl.float32, buffer=nl.sbuf)
        zl, el = nl.zeros_like(t), nl.empty_like(t, dtype=nl.bfloat16)
        assert (zl.shape, el.shape, el.dtype) == (t.shape, t.shape, nl.bfloat16)
        c = nl.shared_constant(np.arange(8, dtype=np.float32).reshape(1, 8))
        return _out(z), _out(o), _out(f), _out(zl), _out(nl.load(c))

    z, o, f, zl, c = run(k, backend, np.ones((128, 8), np.float32))
    np.testing.assert_array_equal(z, 0.0)
    np.testing.assert_array_equal(o, 1.0)
    np.testing.assert_array_equal(f, 2.5)
    np.testing.assert_array_equal(zl, 0.0)
    np.testing.assert_array_equal(c, np.arange(8, dtype=np.float32).reshape(1, 8))


@pytest.mark.parametrize("make", [
    lambda x: nl.ndarray(x.shape, x.dtype, buffer="sbuf"), lambda x: nl.zeros((128, 8), nl.float32, buffer="psum"),
    lambda x: nl.full((128, 8), 1.0, nl.float32, buffer="sbuf"), lambda x: nl.zeros_like(x, buffer="shared_hbm"),
    lambda x: nl.ones((128, 8), nl.float32, buffer="sbuf"), lambda x: nl.empty_like(x, buffer="sbuf"),
], ids=["ndarray", "zeros", "full", "zeros_like", "ones", "empty_like"])  # fmt: skip
def test_a_string_buffer_name_is_refused(make):
    @nki.jit
    def k(x):
        make(x)
        return x

    with pytest.raises(nki.NkiApiError, match=r"buffer='\w+': the current API takes a buffer object \(nl\.\w+\), "
                                              r"not a name \(NKI 0.3.0 rejects string buffer names\)"):  # fmt: skip
        k(np.ones((128, 8), np.float32))


@BACKENDS
def test_movement_and_matmul_wrappers(backend):
    shapes = {}
    rng = np.random.default_rng(8)
    x, w = rng.uniform(-1, 1, (128, 64)).astype(np.float32), rng.uniform(-1, 1, (128, 32)).astype(np.float32)

    @nki.jit
    def k(x, w):
        t, tw = _sbuf(x), _sbuf(w)
        mm = nl.copy(nl.matmul(t, tw, transpose_x=True))  # x^T w, through PSUM
        tr = nl.copy(nl.transpose(t))  # [64, 128]
        lt = nl.load_transpose2d(x)  # [64, 128] straight from HBM
        col = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=col, src=x[:, 0:1])
        wide = nl.broadcast_to(col, shape=(128, 16))
        picked = nl.where(nl.greater(t, 0.0), t, 0.0)
        shapes["expanded"] = nl.expand_dims(t, 1).shape
        return _out(mm), _out(tr), _out(lt), _out(wide), _out(picked)

    mm, tr, lt, wide, picked = run(k, backend, x, w)
    np.testing.assert_allclose(mm, x.T.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(tr, x.T)
    np.testing.assert_array_equal(lt, x.T)
    np.testing.assert_array_equal(wide, np.repeat(x[:, :1], 16, axis=1))
    np.testing.assert_array_equal(picked, np.maximum(x, 0.0))
    assert shapes == {"expanded": (128, 1, 64)}


@BACKENDS
def test_softmax_rms_norm_and_dropout_wrappers(backend):
    rng = np.random.default_rng(9)
    x, w = rng.uniform(-2, 2, (128, 64)).astype(np.float32), rng.uniform(0.5, 1.5, (1, 64)).astype(np.float32)

    @nki.jit
    def k(x, w):
        t = _sbuf(x)
        nl.random_seed(seed=7)
        kept, dropped = nl.dropout(t, rate=0.0), nl.dropout(t, rate=1.0)
        return _out(nl.softmax(t, axis=1)), _out(nl.rms_norm(t, _sbuf(w), axis=1, n=64)), _out(kept), _out(dropped)

    sm, rms, kept, dropped = run(k, backend, x, w)
    e = np.exp(exact(x) - exact(x).max(axis=1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    want = exact(x) / np.sqrt(np.mean(exact(x) ** 2, axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(rms, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(kept, x)
    np.testing.assert_array_equal(dropped, 0.0)


@BACKENDS
def test_buffers_and_their_predicates(backend):
    seen = {}

    @nki.jit
    def k(x):
        s, p = _sbuf(x), nl.ndarray((128, 8), nl.float32, buffer=nl.psum)
        h, ph = nl.ndarray(x.shape, x.dtype, buffer=nl.hbm), nl.ndarray(x.shape, x.dtype, buffer=nl.private_hbm)
        nisa.dma_copy(dst=h, src=s)
        nisa.dma_copy(dst=ph, src=h)
        seen.update(
            sbuf=(nl.is_sbuf(s), nl.is_psum(s), nl.is_hbm(s), nl.is_on_chip(s)),
            psum=(nl.is_sbuf(p), nl.is_psum(p), nl.is_hbm(p), nl.is_on_chip(p)),
            hbm=(nl.is_sbuf(h), nl.is_psum(h), nl.is_hbm(h), nl.is_on_chip(h)),
            arg=(nl.is_hbm(x), nl.is_on_chip(x)), buffers=(nl.is_psum(nl.psum), nl.is_hbm(nl.shared_hbm)))
        return _out(_sbuf(ph))

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(run(k, backend, x), x)
    assert seen == {"sbuf": (True, False, False, True), "psum": (False, True, False, True),
                    "hbm": (False, False, True, False), "arg": (True, False), "buffers": (True, True)}


DTYPES = {
    "float16": (nl.float16, np.float16), "bfloat16": (nl.bfloat16, ml_dtypes.bfloat16),
    "tfloat32": (nl.tfloat32, np.float32), "float8_e4m3": (nl.float8_e4m3, ml_dtypes.float8_e4m3fn),
    "float8_e4m3fn": (nl.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
    "float8_e5m2": (nl.float8_e5m2, ml_dtypes.float8_e5m2),
    "float8_e8m0fnu": (nl.float8_e8m0fnu, ml_dtypes.float8_e8m0fnu), "int8": (nl.int8, np.int8),
    "int16": (nl.int16, np.int16), "int32": (nl.int32, np.int32), "uint8": (nl.uint8, np.uint8),
    "uint16": (nl.uint16, np.uint16), "uint32": (nl.uint32, np.uint32), "bool_": (nl.bool_, np.bool_),
    "float32": (nl.float32, np.float32),
}  # fmt: skip


@pytest.mark.parametrize("name", list(DTYPES))
@BACKENDS
def test_a_dtype_round_trips_through_sbuf_bit_for_bit(name, backend):
    dtype, storage = DTYPES[name]
    bits = np.random.default_rng(len(name)).integers(0, 256, (128, 16 * np.dtype(storage).itemsize), np.uint8)
    x = bits.view(storage) if storage is not np.bool_ else bits.astype(np.bool_)
    if np.dtype(storage).kind not in "iub":  # numbers only: the backends do not keep a NaN's payload bits
        x = np.where(np.isnan(x.astype(np.float32)), storage(1), x)
    assert np.dtype(dtype) == np.dtype(storage)
    got = run(apply, backend, x, fn=lambda t: t)
    assert got.dtype == np.dtype(storage)
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))


def test_tile_size_fields_follow_the_target():
    seen = {}

    def fields(x):
        seen[nisa.get_nc_version()] = {
            "pmax": nl.tile_size.pmax, "psum_fmax": nl.tile_size.psum_fmax,
            "psum_bank_fmax": nl.tile_size.psum_bank_fmax, "psum_bank_fmax_bytes": nl.tile_size.psum_bank_fmax_bytes,
            "psum_num_banks": nl.tile_size.psum_num_banks, "gemm_stationary_fmax": nl.tile_size.gemm_stationary_fmax,
            "gemm_moving_fmax": nl.tile_size.gemm_moving_fmax, "bn_stats_fmax": nl.tile_size.bn_stats_fmax,
            "sbuf_size_bytes": nl.tile_size.sbuf_size_bytes, "sbuf_fmax": nl.tile_size.sbuf_fmax,
            "sbuf_fmax_bytes": nl.tile_size.sbuf_fmax_bytes,
            "total_available_sbuf_size": nl.tile_size.total_available_sbuf_size,
            "psum_min_align": nl.tile_size.psum_min_align, "sbuf_min_align": nl.tile_size.sbuf_min_align}
        return _out(_sbuf(x))

    for target in ("trn1", "trn2", "trn3"):
        nki.simulate(nki.jit(fields), np.zeros((1, 1), np.float32), target=target)
    assert set(seen) == {nisa.nc_version.gen2, nisa.nc_version.gen3, nisa.nc_version.gen4}
    for f in seen.values():
        assert (f["pmax"], f["psum_num_banks"], f["gemm_stationary_fmax"], f["gemm_moving_fmax"]) == (128, 8, 128, 512)
        assert f["psum_fmax"] == f["psum_bank_fmax"] == f["bn_stats_fmax"] == 512
        assert f["psum_bank_fmax_bytes"] == 4 * f["psum_bank_fmax"] == 2048  # one 2 KiB bank (§1.1)
        assert f["sbuf_fmax_bytes"] == f["total_available_sbuf_size"] == 4 * f["sbuf_fmax"]  # per partition
        assert f["sbuf_size_bytes"] == 128 * f["total_available_sbuf_size"]  # all partitions
        assert f["psum_min_align"] > 0 and f["sbuf_min_align"] > 0
    usable = [seen[g]["total_available_sbuf_size"] for g in sorted(seen)]
    assert usable == sorted(usable) and usable[0] < usable[-1]  # the SBUF grows with the generation


@BACKENDS
def test_nkitensor_is_every_tensor_handle(backend):
    kinds = {}

    @nki.jit
    def k(x: nl.NkiTensor):
        t = _sbuf(x)
        kinds.update(arg=isinstance(x, nl.NkiTensor), tile=isinstance(t, nl.NkiTensor),
                     view=isinstance(t[0:64, :], nl.NkiTensor), number=isinstance(3, nl.NkiTensor))
        return _out(t)

    x = np.ones((128, 4), np.float32)
    np.testing.assert_array_equal(run(k, backend, x), x)
    assert kinds == {"arg": True, "tile": True, "view": True, "number": False}
