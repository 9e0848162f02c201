"""The current API's loop semantics (Python's: loops are unrolled at specialisation, reference/nki.md §2.7
"Control flow") and the rule that keeps the IR compact: a loop stays symbolic unless its body needs the index
as a Python int or carries Python state (nki_dsl/current/specialize.py)."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl


def _loops(kernel, *args):
    ir = nki_dsl.trace(kernel, *args).ir
    return [s for s, _ in ir.walk() if s.__class__.__name__ == "Loop"], ir


def _copy_in(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


X = np.arange(128 * 512, dtype=np.float32).reshape(128, 512) / 1000


def test_python_counter_in_a_loop_counts_every_iteration():
    """``val += 1`` in an affine_range loop gives the trip count, as the current compiler does (legacy gave 1)."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        val = 0
        for _ in nl.affine_range(8):
            val += 1
        t = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(val))
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(kernel(X), np.full((128, 1), 8.0, np.float32))


def test_branch_on_the_index_resolves_per_iteration():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        t = _copy_in(x)
        for j in nl.affine_range(4):
            r = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
            if j == 0:
                nisa.memset(dst=r, value=-1.0)
            else:
                nisa.tensor_scalar(dst=r, data=t[:, j * 128:(j + 1) * 128], op0=nl.multiply, operand0=float(j))
            nisa.dma_copy(dst=out[:, j * 128:(j + 1) * 128], src=r)
        return out

    expected = X * np.repeat(np.arange(4, dtype=np.float32), 128)[None, :]
    expected[:, :128] = -1
    np.testing.assert_allclose(kernel(X), expected, rtol=1e-6)
    loops, _ = _loops(kernel, X)
    assert loops == []  # unrolled: the body needed j as a Python int


@pytest.mark.parametrize("key", ["fstring", "str"])
def test_an_index_formatted_into_a_string_is_its_python_int(key):
    """``tiles[f"t{i}"] = t`` in one loop and ``tiles[f"t{i}"]`` in another (str-keyed dicts, §2.7 "Control
    flow"): formatting the index needs its value, so both loops unroll and the keys are "t0", "t1", ..."""
    name = (lambda i: f"t{i}") if key == "fstring" else (lambda i: "t" + str(i))

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        tiles = {}
        for i in nl.affine_range(4):
            t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
            tiles[name(i)] = t
        assert sorted(tiles) == ["t0", "t1", "t2", "t3"]
        for i in nl.affine_range(4):
            nisa.dma_copy(dst=out[:, nl.ds((3 - i) * 128, 128)], src=tiles[name(i)])
        return out

    want = np.concatenate([X[:, k * 128:(k + 1) * 128] for k in (3, 2, 1, 0)], axis=1)
    np.testing.assert_array_equal(kernel(X), want)
    assert _loops(kernel, X)[0] == []


def test_independent_loops_stay_symbolic_and_the_ir_does_not_grow_with_trip_count():
    def make():
        @nki.jit
        def kernel(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            for i in nl.affine_range(x.shape[1] // 128):
                t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x[:, i * 128:(i + 1) * 128])
                nisa.activation(dst=t, op=nl.exp, data=t)
                nisa.dma_copy(dst=out[:, i * 128:(i + 1) * 128], src=t)
            return out

        return kernel

    small, large = np.ones((128, 256), np.float32), np.ones((128, 4096), np.float32)
    (loop_s,), ir_s = _loops(make(), small)
    (loop_l,), ir_l = _loops(make(), large)
    assert loop_s.kind == "affine" and (loop_s.trip_count, loop_l.trip_count) == (2, 32)
    assert len(list(ir_s.walk())) == len(list(ir_l.walk()))
    assert ir_l.specialization_rounds == 1
    np.testing.assert_allclose(make()(large), np.exp(large), rtol=1e-6)


def test_reused_loop_variable_names_do_not_force_unrolling():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = _copy_in(x)
        for i in nl.affine_range(4):
            r = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.activation(dst=r, op=nl.exp, data=t[:, i * 128:(i + 1) * 128])
            nisa.dma_copy(dst=out[:, i * 128:(i + 1) * 128], src=r)
        for i in nl.affine_range(4):  # same names i and r
            r = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=r, src=out[:, i * 128:(i + 1) * 128])
            nisa.activation(dst=r, op=nl.sqrt, data=r)
            nisa.dma_copy(dst=out[:, i * 128:(i + 1) * 128], src=r)
        return out

    loops, _ = _loops(kernel, X)
    assert len(loops) == 2
    np.testing.assert_allclose(kernel(X), np.sqrt(np.exp(X)), rtol=1e-6)


def test_a_tile_rebound_in_the_loop_is_the_last_iterations_after_it():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 128), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            last = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=last, src=x[:, i * 128:(i + 1) * 128])
        nisa.dma_copy(dst=out, src=last)
        return out

    np.testing.assert_array_equal(kernel(X), X[:, 384:512])


def test_functional_accumulation_through_a_python_variable():
    """``acc = acc + x`` with the convenience wrappers: each iteration reads the previous one's tile."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            acc = nl.add(acc, nl.load(x[:, i * 128:(i + 1) * 128]))
        nl.store(out, acc)
        return out

    np.testing.assert_allclose(kernel(X), X.reshape(128, 4, 128).sum(axis=1), rtol=1e-6)


def test_a_carried_dependence_through_a_tensor_makes_the_loop_sequential():
    """``t = t * 2`` into a tensor declared outside an affine_range loop: legacy's verifier refuses it; the
    current API's loops run in order, so the loop is kept and marked sequential."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, 0:128])
        for _ in nl.affine_range(3):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    (loop,), _ = _loops(kernel, X)
    assert loop.kind == "sequential"
    np.testing.assert_array_equal(kernel(X), X[:, :128] * 8)


def test_matmul_accumulate_flags():
    a = np.random.default_rng(1).uniform(-1, 1, (128, 128)).astype(np.float32)
    b = np.random.default_rng(2).uniform(-1, 1, (128, 512)).astype(np.float32)

    @nki.jit
    def kernel(a, b, second):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        ta, tb = _copy_in(a), _copy_in(b)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=ta, moving=tb)  # first write: overwrites
        nisa.nc_matmul(dst=p, stationary=ta, moving=tb, accumulate=second)
        r = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    once = a.astype(np.float64).T @ b
    np.testing.assert_allclose(kernel(a, b, None), 2 * once, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(kernel(a, b, True), 2 * once, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(kernel(a, b, False), once, rtol=1e-5, atol=1e-4)


def test_accumulation_group_over_nested_reduction_loops():
    """Two nested loops over K halves: the group opens at the first iteration of the outer one."""
    a = np.random.default_rng(3).uniform(-1, 1, (512, 128)).astype(np.float32)
    b = np.random.default_rng(4).uniform(-1, 1, (512, 512)).astype(np.float32)

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.memset(dst=r, value=0.0)  # something between the allocation and the loops
        for k0 in nl.affine_range(2):
            for k1 in nl.affine_range(2):
                k = k0 * 2 + k1
                ta = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
                tb = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=ta, src=a[k * 128:(k + 1) * 128, :])
                nisa.dma_copy(dst=tb, src=b[k * 128:(k + 1) * 128, :])
                nisa.nc_matmul(dst=p, stationary=ta, moving=tb)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64).T @ b, rtol=1e-5, atol=1e-4)
    assert len(_loops(kernel, a, b)[0]) == 2


def test_static_range_always_unrolls():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.static_range(4):
            t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, i * 128:(i + 1) * 128])
            nisa.dma_copy(dst=out[:, i * 128:(i + 1) * 128], src=t)
        return out

    assert _loops(kernel, X)[0] == []
    np.testing.assert_array_equal(kernel(X), X)


@pytest.mark.parametrize("target, gen", [("trn1", 2), ("trn2", 3), ("trn3", 4)])
def test_get_nc_version_follows_the_target(target, gen):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        v = nisa.get_nc_version()
        nisa.memset(dst=t, value=float(v) + (0.5 if v >= nisa.nc_version.gen3 else 0.0))
        nisa.dma_copy(dst=out, src=t)
        return out

    out, _ = nki.simulate(kernel, X, target=target)
    assert out[0, 0] == gen + (0.5 if gen >= 3 else 0.0)


def test_dynamic_range_and_fori_loop_emit_the_body_once():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        seen = []
        for i in nl.dynamic_range(4):
            seen.append(i)  # Python state changes once, at trace: the loop is not unrolled
            t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
            nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)
        assert len(seen) == 1

        def negate(i):
            t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=out[:, nl.ds(i * 128, 128)])
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=-1.0)
            nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)

        nl.fori_loop(0, 4, negate)
        return out

    loops, _ = _loops(kernel, X)
    assert [lp.kind for lp in loops] == ["sequential", "sequential"]
    np.testing.assert_array_equal(kernel(X), -X)


def test_while_loop_needs_a_register_condition():
    """(Runtime loops themselves are tested in test_runtime_loops.py.)"""

    @nki.jit
    def kernel(x):
        nl.while_loop(None, lambda r: r)
        return x

    with pytest.raises(nki_dsl.NkiApiError, match=r"'init' must be a register \(nisa.register_alloc\)"):
        kernel(X)


def test_ranges_consumed_other_than_by_a_for_statement_are_unrolled():
    """zip, list() and comprehensions take every index: a symbolic loop yielding once would cut them short."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf) for _ in nl.affine_range(4)]
        for i, t in zip(nl.affine_range(4), tiles):
            nisa.dma_copy(dst=t, src=x[:, i * 128:(i + 1) * 128])
        for i in list(nl.sequential_range(4)):
            nisa.dma_copy(dst=out[:, i * 128:(i + 1) * 128], src=tiles[i])
        return out

    np.testing.assert_array_equal(kernel(X), X)
    assert _loops(kernel, X)[0] == []


def test_matmul_into_a_slice_of_a_region_written_before_accumulates():
    a = np.random.default_rng(5).uniform(-1, 1, (128, 128)).astype(np.float32)
    b = np.random.default_rng(6).uniform(-1, 1, (128, 512)).astype(np.float32)

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        ta, tb = _copy_in(a), _copy_in(b)
        p = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=p, stationary=ta, moving=tb)  # the whole bank
        nisa.nc_matmul(dst=p[:, 0:256], stationary=ta, moving=tb[:, 0:256])  # adds into the left half
        nisa.nc_matmul(dst=p[0:64, 256:512], stationary=ta[:, 0:64], moving=tb[:, 256:512])  # and a corner
        r = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=p)
        nisa.dma_copy(dst=out, src=r)
        return out

    once = a.astype(np.float64).T @ b
    expected = once.copy()
    expected[:, :256] *= 2
    expected[:64, 256:] *= 2
    np.testing.assert_allclose(kernel(a, b), expected, rtol=1e-5, atol=1e-4)


def test_unrolling_decisions_carry_over_to_the_next_specialisation():
    from tests.current_api.matmul_guide import matmul_hoisted

    matmul_hoisted.__dict__.pop("_decisions", None)
    first = nki_dsl.trace(matmul_hoisted, nki_dsl.spec((256, 128), "float32"), nki_dsl.spec((256, 512), "float32"))
    again = nki_dsl.trace(matmul_hoisted, nki_dsl.spec((384, 128), "float32"), nki_dsl.spec((384, 512), "float32"))
    assert first.ir.specialization_rounds == 2 and again.ir.specialization_rounds == 1
