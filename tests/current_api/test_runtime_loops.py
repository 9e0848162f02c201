"""Runtime control flow of the current API (reference/nki.md §2.7 "Control flow"; nki_dsl/ir/runtime_loops.py):
``nl.dynamic_range`` / ``nl.fori_loop`` with a trip count held in a register, ``nl.while_loop`` re-reading its
condition register, and the register instructions (``nisa.register_alloc/move/load/store``). Each against a
float64 NumPy formula on the NumPy reference, the JAX backend and the simulator, whose timing follows the trip
count the run read; a register past the loop's declared bound is refused when the kernel runs."""

import inspect

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.current.dynamic import DEFAULT_MAX_TRIP
from nki_dsl.errors import NkiApiError, NkiRuntimeError, NkiVerificationError

BACKENDS = ["numpy", "jax", "simulator"]
X = (np.arange(128 * 512, dtype=np.float32).reshape(128, 512) % 97) / 10


def run(kernel, backend, *args):
    out = nki.simulate(kernel)(*args) if backend == "simulator" else kernel(*args, backend=backend)
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)


def reg(n: int) -> np.ndarray:
    return np.array([[n]], np.int32)


def line_of(kernel, text: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(k for k, src in enumerate(lines) if text in src)


def runtime_loops(kernel, *args):
    return [s for s, _ in nki_dsl.trace(kernel, *args).ir.walk() if getattr(s, "runtime", False)]


# -- dynamic_range with a register stop ---------------------------------------------------------------------------
@nki.jit
def scale_prefix(x, n):
    """out[:, :128 n] = 2 x, the rest 0: n (HBM, int32) 128-column tiles, a register."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    nisa.dma_copy(dst=out, src=zero)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.dynamic_range(count):
        t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)
    return out


def scale_prefix_formula(x, n):
    want = np.zeros(x.shape, np.float64)
    want[:, :128 * n] = 2 * x[:, :128 * n].astype(np.float64)
    return want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 3, 4])
def test_dynamic_range_runs_as_many_iterations_as_the_register_holds(backend, n):
    np.testing.assert_array_equal(run(scale_prefix, backend, X, reg(n)), scale_prefix_formula(X, n))


def test_dynamic_range_is_one_loop_whose_bound_the_body_implies():
    """Traced once (not per register value), as a ``dynamic`` loop reading the register; its declared bound is
    the largest trip count that keeps ``x[:, 128 i ...]`` inside ``x`` (4 for 512 columns)."""
    (loop,) = runtime_loops(scale_prefix, X, reg(2))
    assert (loop.kind, loop.start, loop.stop, loop.step) == ("dynamic", 0, 4, 1)
    assert loop.reads.tensor.type.dtype == "int32" and loop.reads.shape == (1, 1)
    text = nki_dsl.trace(scale_prefix, X, reg(3)).text
    assert "dynamic i0 = range(0, 4, 1) reads %" in text
    assert nki_dsl.trace(scale_prefix, X, reg(1)).text == text  # the value is data, not part of the trace


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_register_past_the_bound_is_refused_when_the_kernel_runs(backend):
    with pytest.raises(NkiRuntimeError) as info:
        run(scale_prefix, backend, X, reg(5))
    line = line_of(scale_prefix, "nl.dynamic_range(count)")
    assert str(info.value).startswith(f"test_runtime_loops.py:{line}: nl.dynamic_range: the nl.dynamic_range "
                                      f"loop i0 read stop 5 from its register, past its declared bound 4")


@nki.jit
def fori_rows(x, n):
    """fori_loop over a register with start 1 and step 2, an explicit max_trip: out row tile k = x tile k + k for
    k = 1, 3, ... < n; others 0."""
    out = nl.ndarray((512, 128), x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    for k in nl.affine_range(4):
        nisa.dma_copy(dst=out[nl.ds(k * 128, 128), :], src=zero)
    stop = nisa.register_alloc(0)
    nisa.register_load(stop, n)

    def body(k):
        t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.ds(k * 128, 128), :])
        idx = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[0, 128]], offset=0, channel_multiplier=0)  # zeros
        nisa.tensor_tensor(dst=t, data1=t, data2=idx, op=nl.add)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[nl.ds(k * 128, 128), :], src=t)

    nl.fori_loop(1, stop, body, step=2, max_trip=2)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 2, 4, 5])
def test_fori_loop_with_a_register_stop_a_start_and_a_step(backend, n):
    x = X[:, :128].reshape(128, 128).repeat(4, axis=0)
    want = np.zeros((512, 128))
    for k in range(1, n, 2):
        want[k * 128:(k + 1) * 128] = x[k * 128:(k + 1) * 128].astype(np.float64) + 1
    np.testing.assert_allclose(run(fori_rows, backend, x, reg(n)), want, rtol=1e-6)
    (loop,) = runtime_loops(fori_rows, x, reg(n))
    assert (loop.start, loop.stop, loop.step) == (1, 5, 2)  # max_trip=2: stops 1 and 3


# -- while_loop -----------------------------------------------------------------------------------------------------
@nki.jit
def doubling(x, n):
    """x * 2**n: a while loop whose condition (count < n) the body recomputes into the register."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    limit = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=limit, src=n)
    count = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=count, value=0)
    flag = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=flag, data1=count, data2=limit, op=nl.less)
    cond = nisa.register_alloc()
    nisa.register_load(cond, flag)

    def body(c):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=2.0)
        nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=1)
        nisa.tensor_tensor(dst=flag, data1=count, data2=limit, op=nl.less)
        nisa.register_load(c, flag)
        return c

    nl.while_loop(cond, body, max_trip=16)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 5, 16])
def test_while_loop_rereads_its_condition_every_iteration(backend, n):
    x = X[:, :64]
    np.testing.assert_array_equal(run(doubling, backend, x, reg(n)), x.astype(np.float64) * 2.0**n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_while_loop_still_running_at_its_bound_is_refused(backend):
    with pytest.raises(NkiRuntimeError) as info:
        run(doubling, backend, X[:, :64], reg(17))
    line = line_of(doubling, "nl.while_loop(cond, body")
    assert str(info.value).startswith(f"test_runtime_loops.py:{line}: nl.while_loop: the nl.while_loop loop i0 "
                                      f"still had a non-zero condition register (1) after 16 iterations")


@nki.jit
def countdown(x, n):
    """The body returns a register other than the one it was given, counting n down to 0 (no max_trip: the
    default bound): out = x + n."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    left = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=left, src=n)
    cond = nisa.register_alloc()
    nisa.register_load(cond, left)

    def body(c):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=left, data=left, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc()
        nisa.register_load(nxt, left)
        return nxt

    nl.while_loop(cond, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_loop_body_may_return_another_register(backend):
    x = X[:, :32]
    np.testing.assert_allclose(run(countdown, backend, x, reg(7)), x.astype(np.float64) + 7, rtol=1e-6)
    (loop,) = runtime_loops(countdown, x, reg(7))
    assert (loop.kind, loop.stop) == ("while", DEFAULT_MAX_TRIP)


# -- the register instructions --------------------------------------------------------------------------------------
@nki.jit
def registers(x):
    """register_alloc(x=), register_move, register_load from SBUF and HBM, register_store to SBUF and HBM."""
    out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
    a = nisa.register_alloc(7)
    b = nisa.register_alloc()
    nisa.register_move(b, -3)
    c = nisa.register_alloc()
    nisa.register_load(c, x[0:1, 2:3])  # from HBM
    t = nl.ndarray((1, 4), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    d = nisa.register_alloc()
    nisa.register_load(d, t[0:1, 3:4])  # from SBUF
    nisa.register_store(t[0:1, 0:1], a)  # to SBUF
    nisa.register_store(t[0:1, 1:2], b)
    nisa.register_store(t[0:1, 2:3], d)
    nisa.dma_copy(dst=out, src=t)
    nisa.register_store(out[0:1, 3:4], c)  # to HBM
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_register_instructions_move_one_value(backend):
    x = np.array([[10, 20, 30, 40]], np.int32)
    np.testing.assert_array_equal(run(registers, backend, x), [[7, -3, 40, 30]])


@pytest.mark.parametrize("call, message", [
    (lambda x: nisa.register_move(nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf), 1),
     r"nisa.register_move: 'dst' is not a register: the tensor must be one element, not an access of shape \[2, 1\]"),
    (lambda x: nisa.register_move(nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf), 1),
     r"'dst' is not a register: the tensor %\w+ must hold an integer, not float32"),
    (lambda x: nisa.register_move(nisa.register_alloc(), 1.5), r"imm must be a Python int, got float 1.5"),
    (lambda x: nisa.register_alloc(1 << 31), r"x=2147483648 does not fit a 32-bit register"),
    (lambda x: nisa.register_load(nisa.register_alloc(), x), r"'src' must be one element .*not shape \[128, 512\]"),
    (lambda x: list(nl.dynamic_range(x)), r"nl.dynamic_range: 'stop' is not a register: the tensor %x must be in "
                                          r"SBUF, not hbm"),
    (lambda x: list(nl.dynamic_range(nisa.register_alloc(), 8)), r"a register start is not modelled"),
    (lambda x: list(nl.dynamic_range(nisa.register_alloc(), max_trip=0)), r"max_trip=0 must be a positive"),
    (lambda x: nl.while_loop(nisa.register_alloc(1), lambda c: None), r"body_fun must return the register"),
])  # fmt: skip
def test_misuse_is_refused_with_the_reason(call, message):
    @nki.jit
    def kernel(x):
        call(x)
        return x

    with pytest.raises(NkiApiError, match=message):
        kernel(X)


# -- the verifier over the declared range, and the simulator's timing ---------------------------------------------
@nki.jit
def too_far(x, n):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.dynamic_range(count, max_trip=5):
        t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
        nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)
    return out


def test_the_verifier_proves_bounds_over_the_declared_range():
    """A max_trip the tensor cannot hold is refused before anything runs, whatever the register would hold:
    the out-of-bounds rule reads the loop's declared range."""
    with pytest.raises(NkiVerificationError) as info:
        too_far(X, reg(1))
    d = next(d for d in info.value.diagnostics if d.rule == "out-of-bounds")
    line = line_of(too_far, "nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])")
    assert str(d).startswith(f"test_runtime_loops.py:{line}: nisa.dma_copy: ")
    assert "dynamic_range loop at line" in d.message


def test_simulated_time_follows_the_trip_count_the_run_read():
    times = [nki.simulate(scale_prefix, X, reg(n))[1].latency_ns for n in (0, 1, 2, 4)]
    assert times == sorted(times) and len(set(times)) == 4
    # timing from shapes alone (no register value) runs each runtime loop to its declared bound
    bound = nki_dsl.benchmark(scale_prefix, X, reg(0)).latency_ns
    assert bound == pytest.approx(times[-1])


def test_the_register_stays_allocated_through_the_loop_that_reads_it():
    """Its last op use is the register_load before the loop: the allocator still keeps the body's tiles off it."""
    from nki_dsl.passes.pipeline import compile_for_target

    lowered, alloc = compile_for_target(nki_dsl.trace(scale_prefix, X, reg(2)).ir, nki_dsl.get_target("trn2"))
    (loop,) = [s for s, _ in lowered.walk() if getattr(s, "runtime", False)]
    r = alloc.placements[loop.reads.tensor.name]
    tiles = [alloc.placements[s.result.name] for s in _walk(loop.body)
             if getattr(s, "result", None) is not None and s.result.name in alloc.placements]  # fmt: skip
    assert tiles
    for p in tiles:
        assert p.byte_offset >= r.byte_offset + r.footprint or r.byte_offset >= p.byte_offset + p.footprint, p


def _walk(body):
    for s in body:
        yield s
        yield from _walk(getattr(s, "body", []))


@nki.jit
def scale_static(x, n):
    """``scale_prefix`` with the trip count known at trace time (a sequential loop over every tile)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    nisa.dma_copy(dst=out, src=zero)
    count = nisa.register_alloc()
    nisa.register_load(count, n)
    for i in nl.sequential_range(x.shape[1] // 128):
        t = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(i * 128, 128)])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[:, nl.ds(i * 128, 128)], src=t)
    return out


def test_a_runtime_loop_is_timed_as_the_static_loop_of_its_trip_count():
    """The same instructions, iteration for iteration; the runtime loop's first one also waits for the register
    (its load is the last thing before the loop), a constant however many iterations follow."""
    waits = []
    for columns in (512, 2048):
        x = np.ones((128, columns), np.float32)
        n = reg(columns // 128)
        static = nki.simulate(scale_static, x, n)[1].latency_ns
        dynamic = nki.simulate(scale_prefix, x, n)[1].latency_ns
        assert 0 < dynamic - static < 100, (static, dynamic)
        waits.append(dynamic - static)
    assert waits[0] == pytest.approx(waits[1])


@pytest.mark.parametrize("kernel, n, want", [
    pytest.param(scale_prefix, 2, lambda x: np.where(np.arange(512) < 256, 8 * x, 0.0),  # sum((2x)^2), prefix
                 marks=pytest.mark.slow),  # (a 512-column kernel: 2-6 s of XLA compiling the twin)
    (doubling, 3, lambda x: 128 * x),  # d/dx sum((8x)^2)
])  # fmt: skip
def test_reverse_mode_derivatives_through_runtime_loops_on_jax(kernel, n, want):
    """jax.grad cannot transpose a loop with a traced trip count; the gradient twin runs the declared bound with
    the iterations past the run's as no-ops (backends/jax/runtime_loops.py)."""
    import jax
    import jax.numpy as jnp

    x = X if kernel is scale_prefix else X[:, :64]
    grad = jax.grad(lambda a: jnp.sum(kernel(a, reg(n), backend="jax") ** 2))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(grad), want(x.astype(np.float64)), rtol=1e-6)
