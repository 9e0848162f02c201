"""A sweep over the nl ops: each lowered to engine instructions computes what the nl op computes on the NumPy
reference. Bit-identical everywhere except ``cos``/``tan``, which go through the Scalar engine's ``sin`` of
``x + pi/2`` and are compared within 1e-6 (the fp32 rounding of that sum)."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.ops.language import BINARY_NL, REDUCTIONS, UNARY_NL
from tests.passes.lowering import lowered_matches

RNG = np.random.default_rng(7)
X = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
Y = (RNG.standard_normal((128, 64)) * 3).astype(np.float32)
INTS = RNG.integers(-50, 50, size=(128, 64)).astype(np.int32)
POSITIVE = {"log", "sqrt", "rsqrt"}
APPROXIMATE = {"cos": 2e-6, "tan": 2e-6}


def _unary_kernel(fn):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=getattr(nl, fn)(nl.load(x)))
        return out

    return k


@pytest.mark.parametrize("fn", UNARY_NL)
def test_unary_float(fn):
    x = np.abs(X) + 0.5 if fn in POSITIVE else X
    if fn in ("logical_not", "invert"):
        x = INTS if fn == "invert" else X.round()
    if fn == "tan":  # away from the poles, where a rounding of x + pi/2 changes tan by any amount
        x = np.clip(X, -1.2, 1.2)
    tol = APPROXIMATE.get(fn, 0.0)
    lowered_matches(_unary_kernel(fn), x, atol=tol, rtol=tol)


@pytest.mark.parametrize("fn", ["abs", "relu", "square", "sign", "negative", "floor", "ceil", "trunc"])
def test_unary_int_stays_exact(fn):
    lowered_matches(_unary_kernel(fn), INTS)


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_])
def test_invert_unsigned_and_bool(dtype):
    lowered_matches(_unary_kernel("invert"), (INTS > 0).astype(dtype) * (1 if dtype == np.bool_ else 200))


def test_floor_ceil_trunc_at_fractions_near_zero():
    x = np.array([[-1e-8, 1e-8, -0.5, 0.5, -2.5, 2.5, -0.3, 7.99999]], np.float32).repeat(4, 0)
    for fn in ("floor", "ceil", "trunc"):
        lowered_matches(_unary_kernel(fn), x)


def _binary_kernel(fn, form):
    @nki.jit
    def k(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a, b = nl.load(x), nl.load(y)
        f = getattr(nl, fn)
        if form == "tiles":
            r = f(a, b)
        elif form == "imm_right":
            r = f(a, 1.5)
        elif form == "imm_left":
            r = f(1.5, a)
        elif form == "column_right":
            r = f(a, nl.max(b, axis=1, keepdims=True))
        else:
            r = f(nl.max(b, axis=1, keepdims=True), a)
        nl.store(out, value=r)
        return out

    return k


FLOAT_BINARY = [f for f in BINARY_NL if not f.startswith(("bitwise", "left", "right"))]
FORMS = ["tiles", "imm_right", "imm_left", "column_right", "column_left"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("fn", FLOAT_BINARY)
def test_binary_float(fn, form):
    y = np.abs(Y) + 0.5 if fn in ("power", "mod", "fmod", "divide") else Y
    x = np.abs(X) if fn == "power" else X
    lowered_matches(_binary_kernel(fn, form), x, y)


@pytest.mark.parametrize("fn", [f for f in BINARY_NL if f.startswith(("bitwise", "left", "right"))])
def test_binary_int(fn):
    lowered_matches(_binary_kernel(fn, "tiles"), INTS, np.abs(INTS) % 5)


def _reduce_kernel(name, keepdims):
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=getattr(nl, name)(nl.load(x), axis=1, keepdims=keepdims))
        return out

    return k


@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name, keepdims):
    x = X.round() if name == "all" else X
    lowered_matches(_reduce_kernel(name, keepdims), x)


def test_reduction_bf16_mean_and_var():
    x = X.astype(ml_dtypes.bfloat16)
    for name in ("mean", "var", "sum"):
        lowered_matches(_reduce_kernel(name, True), x)


@nki.jit
def _movement(x, w):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    small = nl.transpose(a[0:32, 0:16])  # [16, 32]: Vector-engine transpose
    big = nl.transpose(a)  # [64, 128]: Tensor engine via PSUM
    back = nl.copy(nl.transpose(big))
    row = nl.load(w)  # [1, 64]
    spread = nl.broadcast_to(row, shape=(128, 64))  # across partitions: DMA
    col = nl.max(a, axis=1, keepdims=True)
    wide = col.broadcast_to((128, 64))  # along the free axis: tensor_copy
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[...] = 2.0
    t[...] += back * spread + wide
    t[0:16, 0:32] += small
    nl.store(out, value=t)
    return out


def test_movement_copies_and_assignments():
    lowered_matches(_movement, X, Y[:1])


@nki.jit
def _matmuls(x, y):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    a, b = nl.load(x), nl.load(y)  # [128, 64], [128, 128]
    acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
    acc += nl.matmul(a, b, transpose_x=True)  # a.T @ b
    acc += nl.matmul(nl.transpose(a), b)  # x is [M, K] = [64, 128]: transposed on the Tensor engine first
    ones = nl.ones((64, 128), nl.bfloat16)
    nl.store(out, value=nl.copy(acc) + ones)
    return out


def test_matmul_both_layouts_and_fills():
    lowered_matches(_matmuls, X, np.concatenate([Y, Y], axis=1))


@nki.jit
def _masked(x):
    rows = x.shape[0]
    out = nl.ndarray((64, rows), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        xt = nl.load_transpose2d(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < rows))  # [64, 128]
        y = nl.exp(xt)
        j_p = nl.arange(64)[:, None]
        j_f = nl.arange(128)[None, :]
        nl.store(out[j_p, t * 128 + j_f], value=y, mask=(t * 128 + j_f < rows))
    return out


def test_masks_carry_over():
    lowered_matches(_masked, X[:100])


@nki.jit
def _expand(x):
    out = nl.ndarray((128, 1, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.expand_dims(nl.load(x), 1))
    return out


def test_expand_dims():
    lowered_matches(_expand, X)


@nki.jit
def _block_accumulate(x):
    # A par_dim block tensor zeroed by nl.zeros and accumulated into tile by tile (as a K-blocked matmul does).
    out = nl.ndarray((128, 4 * 32), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((4, nl.par_dim(128), 32), nl.float32, buffer=nl.sbuf)
    for k in nl.sequential_range(3):
        for b in nl.affine_range(4):
            acc[b] += nl.load(x[:, k * 16:k * 16 + 32])
    for b in nl.affine_range(4):
        nl.store(out[:, b * 32:(b + 1) * 32], value=acc[b])
    return out


def test_a_zeroed_par_dim_block_keeps_its_partition_layout():
    from nki_dsl.passes.allocate import allocate

    low = lowered_matches(_block_accumulate, X)
    (memset,) = [s for s, _ in low.walk() if getattr(s, "name", "") == "nisa.memset"]
    assert memset.result.type.partitions == 128 and memset.result.type.bytes_per_partition == 4 * 32 * 4
    assert allocate(low, nki.get_target("trn2")).peak_bytes("sbuf") < 8 * 1024
