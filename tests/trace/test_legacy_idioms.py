"""Legacy-API calls and idioms of AWS's kernels and the legacy NKI docs that the sweep of
docs/legacy_api_coverage.md found missing or refused, each run as a minimal kernel against NumPy (and the
simulator), or refused with its reason: ``nl.rand``, ``nl.shared_identity_matrix``, ``nl.atomic_rmw``,
``nisa.nc_stream_shuffle``, ``@nki.benchmark(...)``'s ``benchmark_result``, a loop index used as data, a
one-element load, and the refusals (``nl.gather_flattened``, ``nisa.max8``, ...)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.targets import DEFAULT_TARGET

X = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 13) / 13


def _both(kernel, *args):
    """The kernel's outputs on the NumPy reference, checked equal to the simulator's."""
    got = kernel(*args)
    sim, _ = nki.simulate(kernel, *args, target="trn2")
    for a, b in zip(got if isinstance(got, tuple) else (got,), sim if isinstance(sim, tuple) else (sim,)):
        np.testing.assert_array_equal(a, b)
    return got


@nki.jit
def _rand_kernel(seed):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.random_seed(seed)
    nl.store(out, value=nl.rand((128, 64), dtype=nl.float32))
    return out


def test_rand_draws_the_documented_uniforms():
    got = _both(_rand_kernel, 5)
    # nl.rand: the low 24 bits of nisa.rng's words times 2^-24 (language/random.py), from the seeded generator
    words = np.random.default_rng(5).integers(0, 1 << 32, size=(128, 64), dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(got, (words & 0xFFFFFF).astype(np.float64) * 2.0**-24)
    assert got.min() >= 0 and got.max() < 1 and abs(got.mean() - 0.5) < 0.01  # 8192 draws: sd of the mean 0.003
    assert not np.array_equal(got, _rand_kernel(6))


def test_rand_of_an_integer_dtype_is_refused():
    @nki.jit
    def k():
        out = nl.ndarray((128, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.rand((128, 4), dtype=nl.int32))
        return out

    with pytest.raises(NkiApiError, match="rand draws floats in \\[0, 1\\), not int32; for random bits use nisa.rng"):
        k()


@nki.jit
def _identity_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    eye = nl.shared_identity_matrix(128, dtype=nl.bfloat16)
    nl.store(out, value=nisa.nc_matmul(eye, nl.load(x, dtype=nl.bfloat16)))  # I^T x: x rounded to bf16
    return out


def test_shared_identity_matrix_is_an_identity():
    xb = X.astype(np.float32)
    got = _both(_identity_kernel, xb)
    import ml_dtypes

    np.testing.assert_array_equal(got, xb.astype(ml_dtypes.bfloat16).astype(np.float32))


@nki.jit
def _scatter_add_kernel(x, idx):
    acc = nl.ndarray((8, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(acc, value=nl.zeros((8, 64), dtype=nl.float32))
    nl.atomic_rmw(acc, value=nl.load(x[0:8, :]), op=np.add)  # dense: acc += x[0:8]
    i_f = nl.arange(64)[None, :]
    nl.atomic_rmw(acc[nl.load(idx), i_f], value=nl.load(x), op=nl.add)  # scatter-add of every row
    return acc


def test_atomic_rmw_adds_densely_and_through_an_index_tile():
    idx = (np.arange(128, dtype=np.int32) % 8).reshape(128, 1)
    got = _both(_scatter_add_kernel, X, idx)
    want = X[:8] + np.stack([X[idx[:, 0] == r].sum(0) for r in range(8)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_atomic_rmw_with_another_op_is_refused():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.atomic_rmw(out, value=nl.load(x), op=np.maximum)
        return out

    with pytest.raises(NkiApiError, match="the DMA read-modify-write this project models adds"):
        k(X)


SHUFFLE = [(i * 5) % 32 for i in range(32)]
SHUFFLE[3] = 255  # partition 3 of every quadrant keeps its value


@nki.jit
def _shuffle_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.full(x.shape, -1.0, dtype=x.dtype)
    nisa.nc_stream_shuffle(nl.load(x), dst, SHUFFLE)
    nl.store(out, value=dst)
    return out


def test_nc_stream_shuffle_moves_partitions_within_quadrants():
    got = _both(_shuffle_kernel, X)
    want = np.full_like(X, -1.0)
    for i in range(128):
        if SHUFFLE[i % 32] != 255:
            want[i] = X[i // 32 * 32 + SHUFFLE[i % 32]]
    np.testing.assert_array_equal(got, want)


def test_a_bad_shuffle_mask_is_refused_at_the_call():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.nc_stream_shuffle(t, t, [40] * 32)
        return out

    with pytest.raises(NkiApiError, match="shuffle_mask has 32 entries, each a partition 0..31 of the quadrant"):
        k(X)


def test_benchmark_decorator_with_warmup_and_iters_reports_a_latency():
    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    bench = nki.benchmark(warmup=5, iters=10)(copy)  # as NKI's tutorials benchmark a kernel
    assert bench is copy  # the same kernel, its trace cache kept
    np.testing.assert_array_equal(bench(X), X)
    latency = bench.benchmark_result.nc_latency
    modelled = nki.simulate(copy, X, target=DEFAULT_TARGET)[1].latency_ns / 1000
    assert latency.get_latency_percentile(50) == latency.get_latency_percentile(99) == pytest.approx(modelled)
    with pytest.raises(NkiApiError, match="p is one of"):
        latency.get_latency_percentile(42)


@nki.jit
def _per_tile_seed_kernel(x, seed):
    """AWS's per-tile seed: nl.load(seed[0]) is a [1, 1] tile, nl.add(seed, <loop-index expression>) a new one."""
    out = nl.ndarray((4, 128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    seed_local = nl.ndarray((nl.par_dim(1), 1), buffer=nl.sbuf, dtype=nl.int32)
    seed_local[0, 0] = nl.load(seed[0])
    for i in nl.affine_range(2):
        for j in nl.affine_range(2):
            offset_seed = nl.add(seed_local, i * 2 + j + 100)
            nl.store(out[i * 2 + j], value=nl.broadcast_to(offset_seed, shape=(128, 1)))
    return out


def test_a_loop_index_expression_is_data_and_a_one_element_load_is_a_tile():
    got = _both(_per_tile_seed_kernel, X, np.array([7], np.int32))
    np.testing.assert_array_equal(got[:, :, 0], np.repeat(np.arange(4)[:, None] + 107, 128, axis=1))


def test_an_index_expression_over_tile_axes_is_still_not_data():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(x), nl.arange(64)[None, :]))
        return out

    with pytest.raises(NkiTraceError, match="is an index expression, not data; materialise indices with nisa.iota"):
        k(X)


def test_kernel_launch_with_spmd_dim_and_mgrid_attributes():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 32), a.dtype, buffer=nl.shared_hbm)
        g = nl.mgrid[0:128, 0:32]  # NKI's .p / .x attributes
        i = nl.program_id(axis=0)
        nl.store(out[i, g.p, g.x], value=nl.load(a[g.p, i * 32 + g.x]))
        return out

    got = k[nl.spmd_dim(2)](X)
    np.testing.assert_array_equal(got, X.reshape(128, 2, 32).transpose(1, 0, 2))


REFUSED = {  # call -> the reason the message gives (isa/unmodelled.py, language/legacy_builtins.py)
    "nisa.max8": (lambda t: nisa.max8(src=t), "is composed by the current API"),
    "nisa.nc_find_index8": (lambda t: nisa.nc_find_index8(data=t, vals=t), "is composed by the current API"),
    "nisa.range_select": (lambda t: nisa.range_select(on_true_tile=t), "is composed by the current API"),
    "nisa.select_reduce": (lambda t: nisa.select_reduce(dst=t, predicate=t), "is composed by the current API"),
    "nisa.nc_match_replace8": (lambda t: nisa.nc_match_replace8(data=t, vals=t, imm=0.0), "is not modelled"),
    "nisa.sequence_bounds": (lambda t: nisa.sequence_bounds(segment_ids=t), "is not modelled"),
    "nisa.local_gather": (lambda t: nisa.local_gather(t, t), "no instruction here gathers within partitions"),
    "nisa.tensor_copy_dynamic_src": (lambda t: nisa.tensor_copy_dynamic_src(t), "read from a register at run time"),
    "nisa.tensor_copy_dynamic_dst": (lambda t: nisa.tensor_copy_dynamic_dst(dst=t, src=t), "read from a register"),
    "nisa.builtin_custom_op": (lambda t: nisa.builtin_custom_op(t), "custom GpSimd C++ code, which cannot run here"),
    "nl.gather_flattened": (lambda t: nl.gather_flattened(t, t), "is not modelled: no instruction here gathers"),
    "nl.all_reduce": (lambda t: nl.all_reduce(t, np.add, program_axes=[0]), "the backends run a launch's programs"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(REFUSED))
def test_unmodelled_calls_are_refused_at_the_kernel_line(name):
    call, reason = REFUSED[name]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        call(nl.load(x))
        return out

    with pytest.raises(NkiApiError) as info:
        k(X)
    assert reason in str(info.value) and name in str(info.value)
    assert str(info.value).startswith("test_legacy_idioms.py:")  # names the kernel's line
