"""``t.reshape`` in the current API (reference/nki.md §2.7 "Views": a reshape of compatible contiguity): on-chip
tensors stored ``[P, free]`` merge and split their free axes, slices reshape where they are contiguous, HBM views
merge through the tensor viewed flat; non-contiguous merges and indices past a view's axes are refused at the
kernel line. Each kernel runs on NumPy, JAX and the simulator against a float64 formula."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError, NkiRuntimeError, NkiTraceError, NkiVerificationError
from tests.current_api.kernel_io import indices, out, run_on, sbuf

BACKENDS = ["numpy", "jax", "simulator"]
RNG = np.random.default_rng(12)
X = RNG.standard_normal((128, 64)).astype(np.float32)
A = RNG.standard_normal((128, 128)).astype(np.float32)
B = RNG.standard_normal((128, 512)).astype(np.float32)
H = RNG.standard_normal((4, 128, 64)).astype(np.float32)


def _f64(x):
    return np.asarray(x, np.float64)


@nki.jit
def sbuf_merges(x):
    t = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t.reshape((128, 64)), src=x)  # merged, as a DMA's dst
    u = nl.ndarray((128, 2, 32), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=u.reshape((128, 64)), op=nl.exp, data=t.reshape((128, 64)))  # merged dst and src
    sums = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=sums, op=nl.add, data=u, axis=2)  # the 3-D view itself as a src
    return out(sums)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sbuf_free_axes_merge_as_dst_and_src(backend):
    want = np.exp(_f64(X)).reshape(128, 2, 32).sum(axis=2)
    np.testing.assert_allclose(run_on(sbuf_merges, backend, X), want, rtol=1e-5)


@nki.jit
def psum_merges_and_splits(a, b):
    stationary, moving = sbuf(a), sbuf(b)
    ps = nl.ndarray((128, 2, 256), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps.reshape((128, 512)), stationary=stationary, moving=moving)  # merged PSUM dst
    flat = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=flat, src=ps.reshape((128, 512)))  # merged PSUM src
    ps2 = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps2, stationary=stationary, moving=moving)
    halves = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=halves, op=nl.add, data=ps2.reshape((128, 2, 256)), axis=2)  # split PSUM src
    both = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=both.reshape((128, 2, 512))[:, 0], src=flat)
    nisa.tensor_copy(dst=both.reshape((128, 2, 512))[:, 1, 0:2], src=halves)  # split SBUF dst
    nisa.memset(dst=both.reshape((128, 2, 512))[:, 1, 2:512], value=0.0)
    return out(both)


@pytest.mark.parametrize("backend", BACKENDS)
def test_psum_free_axes_merge_and_split_as_dst_and_src(backend):
    product = _f64(A).T @ _f64(B)
    want = np.zeros((128, 1024))
    want[:, :512] = product
    want[:, 512:514] = product.reshape(128, 2, 256).sum(axis=2)
    np.testing.assert_allclose(run_on(psum_merges_and_splits, backend, A, B), want, rtol=2e-4, atol=1e-3)


@nki.jit
def slices_reshape(x):
    t = nl.ndarray((128, 8, 16), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.dma_copy(dst=t[:, 2:6].reshape((128, 64)), src=x)  # rows 2..5 of every partition: contiguous
    half = t[0:64].reshape((64, 128))  # a partition slice merges its free axes too
    nisa.activation(dst=half[:, 96:128].reshape((64, 2, 16)), op=nl.exp, data=half[:, 32:64].reshape((64, 2, 16)))
    return out(t.reshape((128, 128)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_contiguous_slice_reshapes(backend):
    want = np.zeros((128, 8, 16))
    want[:, 2:6] = _f64(X).reshape(128, 4, 16)
    flat = want.reshape(128, 128)
    flat[0:64, 96:128] = np.exp(flat[0:64, 32:64])
    np.testing.assert_allclose(run_on(slices_reshape, backend, X), flat, rtol=1e-6)


@nki.jit
def hbm_view_reshapes(h):
    rows = nl.ndarray((128, 2, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=h[1:3].reshape((256, 64)).reshape((2, 128, 64)).permute(1, 0, 2))
    result = nl.ndarray((2, 128, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=result.reshape((256, 64))[0:128], src=rows[:, 1])  # a view of an output, merged
    nisa.dma_copy(dst=result[1].reshape((128, 4, 16)), src=rows[:, 0].reshape((128, 4, 16)))
    return result


@pytest.mark.parametrize("backend", BACKENDS)
def test_hbm_views_merge_and_split(backend):
    want = np.stack([_f64(H[2]), _f64(H[1])])
    np.testing.assert_array_equal(run_on(hbm_view_reshapes, backend, H), want)


def _error(kernel, *args, error=NkiApiError):
    with pytest.raises(error) as info:
        nki.jit(kernel)(*args)
    return info.value


def strided_merge(x):
    t = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf, name="t")
    nisa.dma_copy(dst=t[:, :, 0:8].reshape((128, 32)), src=x[:, 0:32])
    return x


def test_merging_a_strided_slice_is_refused_naming_line_op_operand_and_rule():
    err = _error(strided_merge, X)
    assert err.loc.line == strided_merge.__code__.co_firstlineno + 2 and err.op == "reshape"
    assert "the [128, 4, 8] view of %t f32[128, 64] in 'sbuf' to [128, 32]" in str(err)
    assert "axes 1 and 2 are not consecutive in storage (axis 1 steps [0, 16]" in str(err)
    assert "merge only axes that are consecutive in storage" in str(err)


def permuted_merge(x):
    t = sbuf(x).reshape((128, 4, 16))
    t.permute(0, 2, 1).reshape((128, 64))
    return x


def moved_partition(x):
    sbuf(x).reshape((64, 128))
    return x


def op_result_merge(x):
    nl.exp(sbuf(x).reshape((128, 4, 16))).reshape((128, 64))  # an op's tile is stored in its own shape
    return x


@pytest.mark.parametrize("kernel, message", [
    (permuted_merge, "its axes 1 and 2 are not consecutive in storage"),
    (moved_partition, "the partition axis (axis 0, size 128) stays axis 0"),
    (op_result_merge, "is stored [128, 4, 16], one storage axis per free axis"),
])  # fmt: skip
def test_reshapes_that_are_not_views_are_refused(kernel, message):
    assert message in str(_error(kernel, X))


def index_past_a_view_axis(x):
    t = sbuf(x).reshape((128, 4, 16))
    nisa.memset(dst=t[:, 0, 16:20], value=0.0)  # inside the [128, 64] storage, past the view's last axis
    return x


def loop_past_a_merged_view(x):
    t = nl.ndarray((128, 8, 8), nl.float32, buffer=nl.sbuf)
    flat = t.reshape((128, 64))
    for i in nl.affine_range(3):
        nisa.memset(dst=flat[:, nl.ds(i * 24, 24)], value=0.0)
    return x


def test_an_index_past_a_reshaped_views_axis_is_refused_at_the_kernel_line():
    err = _error(index_past_a_view_axis, X, error=NkiTraceError)
    assert err.loc.line == index_past_a_view_axis.__code__.co_firstlineno + 2
    assert "out-of-bounds: out-of-bound access for the [128, 4, 16] view of %" in str(err)
    assert "on view axis 2: index range [16, 19] exceeds its size of 16" in str(err)
    err = _error(loop_past_a_merged_view, X, error=NkiTraceError)
    assert "on view axis 1: index range [0, 71] exceeds its size of 64; the index is d1 + 24*i" in str(err)


def pattern_past_the_storage(x):
    t = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf, name="t")
    nisa.memset(dst=t.ap([[64, 128], [1, 80]]), value=0.0)  # the pattern walks the [128, 64] storage
    return x


def test_the_verifier_bounds_an_access_pattern_by_the_storage():
    with pytest.raises(NkiVerificationError, match=r"out-of-bound access for tensor %t f32\[128, 64\] on dimension "
                                                   r"1: index range \[0, 79\] exceeds dimension size of 64"):
        nki.jit(pattern_past_the_storage)(X)


@nki.jit
def placed(x):
    a = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf, address=(0, 4096))
    b = nl.ndarray((128, 2, 8), nl.float32, buffer=nl.sbuf, address=(0, 4096 + 192))  # inside a's 256 bytes
    nisa.dma_copy(dst=a.reshape((128, 64)), src=x)
    nisa.tensor_copy(dst=b, src=a[:, 0:2, 0:8])
    nisa.tensor_copy(dst=a[:, 0:2, 0:8], src=b)
    return out(a.reshape((128, 64)))


def test_placed_views_still_overlap_by_their_bytes():
    with pytest.raises(NkiVerificationError, match=r"placement of %\w+: overlaps %\w+ .*while both are live"):
        nki.simulate(placed, X, target="trn2")


def test_the_storage_is_one_free_axis_and_instructions_see_the_views_shape():
    text = nki_dsl.trace(sbuf_merges, X).text
    assert "%0 = alloc() : f32[128, 64] sbuf" in text and "%1 = alloc() : f32[128, 64] sbuf" in text
    assert "dma_copy(dst=%0, src=%x)" in text  # t.reshape((128, 64)) is all of t's storage
    assert "tensor_reduce(data=%1[d0, 32*d1 + d2 ; 128x2x32])" in text  # u as [128, 2, 32]


@nki.jit
def columns_of_a_row(x, n):
    """out[:, 0, :n] = 1 through a runtime loop over the last axis of a [128, 4, 16] view (stored [128, 64])."""
    t = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.dynamic_range(count):
        nisa.memset(dst=t[:, 0, nl.ds(i, 1)], value=1.0)
    return out(t.reshape((128, 64)))


def test_a_runtime_loop_over_a_view_axis_is_bounded_by_the_view_not_the_storage():
    """The loop's inferred bound is 16 (the view's axis), not 64 (the storage's row): a register of 17 is refused
    when the kernel runs instead of writing row 1."""
    (loop,) = [s for s, _ in nki_dsl.trace(columns_of_a_row, X, np.array([[3]], np.int32)).ir.walk()
               if getattr(s, "runtime", False)]  # fmt: skip
    assert (loop.kind, loop.start, loop.stop) == ("dynamic", 0, 16)
    got = np.asarray(columns_of_a_row(X, np.array([[3]], np.int32)))
    want = np.zeros((128, 4, 16))
    want[:, 0, :3] = 1
    np.testing.assert_array_equal(got, want.reshape(128, 64))
    with pytest.raises(NkiRuntimeError, match="past its declared bound 16"):
        columns_of_a_row(X, np.array([[17]], np.int32))


def reshaped_register_view(x):
    r = nisa.register_alloc(0)
    x.ap([[64, 128], [1, 64]], offset=0, scalar_offset=r).reshape((128, 4, 16))
    return x


def reshaped_gathered_rows(x, idx):
    x.ap([[64, 128], [1, 64]], vector_offset=indices(idx)).reshape((128, 4, 16))
    return x


@pytest.mark.parametrize("kernel", [reshaped_register_view, reshaped_gathered_rows])
def test_views_moved_at_run_time_are_not_reshaped(kernel):
    """Their access is the pattern at offset 0 (the register or the index tile moves it), so a reshape of that
    access would lose what moves it: refused."""
    idx = np.arange(128, dtype=np.int32)[:, None]
    args = (X,) if kernel is reshaped_register_view else (X, idx)
    assert "cannot be reshaped" in str(_error(kernel, *args, error=NkiTraceError))
