"""``.ap(pattern, offset, scalar_offset=reg, indirect_dim=k)``: an access pattern whose start a register moves
when the instruction runs (reference/nki.md §2.7 "Access patterns"; nki_dsl/trace/runtime_offset.py), taken by
``nisa.dma_copy`` (HBM side) and ``nisa.tensor_copy`` (on chip, what ``tensor_copy_dynamic_src/dst`` did). Each
against NumPy indexing on the NumPy reference, the JAX backend and the simulator; an offset that would leave the
tensor is refused when the kernel runs, naming the line and the value."""

import inspect

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError, NkiRuntimeError

BACKENDS = ["numpy", "jax", "simulator"]
X = (np.arange(512 * 64, dtype=np.float32).reshape(512, 64) % 101) / 7


def run(kernel, backend, *args):
    return np.asarray(nki.simulate(kernel)(*args) if backend == "simulator" else kernel(*args, backend=backend))


def reg(n: int) -> np.ndarray:
    return np.array([[n]], np.int32)


@nki.jit
def rows_at(x, start):
    """out = x[start:start + 128] (HBM source at a runtime row)."""
    F = x.shape[1]
    out = nl.ndarray((128, F), x.dtype, buffer=nl.shared_hbm)
    r = nisa.register_alloc()
    nisa.register_load(r, start)
    t = nl.ndarray((128, F), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[F, 128], [1, F]], offset=0, scalar_offset=r))
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("start", [0, 7, 384])
def test_dma_copy_from_hbm_at_a_runtime_row(backend, start):
    np.testing.assert_array_equal(run(rows_at, backend, X, reg(start)), X[start:start + 128])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("start", [385, -1])
def test_an_offset_leaving_the_tensor_is_refused_when_the_kernel_runs(backend, start):
    with pytest.raises(NkiRuntimeError) as info:
        run(rows_at, backend, X, reg(start))
    lines, first = inspect.getsourcelines(rows_at.fn)
    line = first + next(k for k, text in enumerate(lines) if "scalar_offset=r" in text)
    assert str(info.value) == (f"test_runtime_offsets.py:{line}: ap(scalar_offset=): the scalar_offset register "
                               f"holds {start}, which moves the access outside its tensor (it stays inside for "
                               f"offsets in range(0, 385))")


def test_the_instruction_runs_in_a_loop_over_the_offsets_that_fit():
    text = nki_dsl.trace(rows_at, X, reg(0)).text
    assert "scalar_offset i0 = range(0, 385, 1) reads %" in text  # 385 row offsets keep 128 rows inside 512
    assert "src=%x_r[64*d0 + d1 + 64*i0 ; 128x64]" in text  # the offset moves the flat start by a row (64)


@nki.jit
def block_gather(cache, block_table):
    """A paged KV cache's blocks in the order of a block table read at run time: out[j] = cache[block_table[j]],
    one register per block in an affine loop; on the [blocks, 128, F] cache, indirect_dim=0 makes the register
    count whole blocks (the stride of dimension 0)."""
    n, F = block_table.shape[0], cache.shape[2]
    out = nl.ndarray((n * 128, F), cache.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(n):
        r = nisa.register_alloc()
        nisa.register_load(r, block_table[j:j + 1, 0:1])
        t = nl.ndarray((128, F), cache.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=cache.ap([[F, 128], [1, F]], offset=0, scalar_offset=r, indirect_dim=0))
        nisa.dma_copy(dst=out[nl.ds(j * 128, 128), :], src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_paged_cache_gathered_through_a_runtime_block_table(backend):
    cache = X.reshape(4, 128, 64)
    table = np.array([[2], [0], [3], [2]], np.int32)
    want = np.concatenate([cache[b] for b in table[:, 0]])
    np.testing.assert_array_equal(run(block_gather, backend, cache, table), want)


@nki.jit
def rows_to(x, start):
    """out[start:start + 128] = x[0:128] * 2 (an HBM destination at a runtime row); other rows 0."""
    F = x.shape[1]
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray((128, F), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    for k in nl.affine_range(x.shape[0] // 128):
        nisa.dma_copy(dst=out[nl.ds(k * 128, 128), :], src=zero)
    r = nisa.register_alloc()
    nisa.register_load(r, start)
    t = nl.ndarray((128, F), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out.ap([[F, 128], [1, F]], offset=0, scalar_offset=r), src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_dma_copy_to_hbm_at_a_runtime_row(backend):
    want = np.zeros(X.shape)
    want[200:328] = X[:128].astype(np.float64) * 2
    np.testing.assert_array_equal(run(rows_to, backend, X, reg(200)), want)


@nki.jit
def columns(x, src_col, dst_col):
    """On chip, what tensor_copy_dynamic_src/dst did: t2[:, dst:dst + 64] = t[:, src:src + 64] (indirect_dim=1:
    free elements) and partition offsets (indirect_dim=0): u = t2[p:p + 64] with p = src_col // 8."""
    out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, 0:256] if x.shape[1] >= 256 else x)
    t2 = nl.ndarray((128, 256), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t2, value=0.0)
    s, d = nisa.register_alloc(), nisa.register_alloc()
    nisa.register_load(s, src_col)
    nisa.register_load(d, dst_col)
    nisa.tensor_copy(dst=t2.ap([[256, 128], [1, 64]], offset=0, scalar_offset=d, indirect_dim=1),
                     src=t.ap([[256, 128], [1, 64]], offset=0, scalar_offset=s, indirect_dim=1))
    p = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=p, data=s, op0=nl.right_shift, operand0=3)
    u = nl.ndarray((64, 256), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t2.ap([[256, 64], [1, 256]], offset=0, scalar_offset=p, indirect_dim=0))
    nisa.dma_copy(dst=out, src=u)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src_col, dst_col", [(0, 0), (40, 100), (192, 192)])
def test_tensor_copy_at_runtime_free_and_partition_offsets(backend, src_col, dst_col):
    x = np.asarray(X.reshape(128, 256), np.float32)
    t2 = np.zeros((128, 256))
    t2[:, dst_col:dst_col + 64] = x[:, src_col:src_col + 64]
    p = src_col // 8
    np.testing.assert_array_equal(run(columns, backend, x, reg(src_col), reg(dst_col)), t2[p:p + 64])


@pytest.mark.parametrize("call, message", [
    (lambda x: x.ap([[64, 128], [1, 64]], scalar_offset=nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)),
     r"scalar_offset must be a register .*: the tensor %\w+ must hold an integer, not float32"),
    (lambda x: x.ap([[64, 128], [1, 64]], scalar_offset=nisa.register_alloc(), indirect_dim=2),
     r"indirect_dim=2 must name a dimension of the 2-D tensor 'x'"),
    (lambda x: nisa.dma_copy(dst=nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf),
                             src=x.ap([[64, 600], [1, 64]], scalar_offset=nisa.register_alloc())),
     r"leaves no room for an offset in 'x_r'"),
])  # fmt: skip
def test_misuse_is_refused_with_the_reason(call, message):
    @nki.jit
    def kernel(x):
        call(x)
        return x

    with pytest.raises(NkiApiError, match=message):
        kernel(X)


@nki.jit
def head_of(x, h):
    """out = x[h] of a [heads, 128, F] tensor, the head read at run time: ``select(0, register)``."""
    out = nl.ndarray(x.shape[1:], x.dtype, buffer=nl.shared_hbm)
    r = nisa.register_alloc()
    nisa.register_load(r, h)
    t = nl.ndarray(x.shape[1:], x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.select(0, r))
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_select_with_a_register_picks_the_index_at_run_time(backend):
    x = X.reshape(4, 128, 64)
    for h in (0, 3):
        np.testing.assert_array_equal(run(head_of, backend, x, reg(h)), x[h])
    with pytest.raises(NkiRuntimeError, match="holds 4, which moves the access outside its tensor"):
        run(head_of, backend, x, reg(4))


def test_reverse_mode_derivatives_through_a_runtime_offset_on_jax():
    import jax
    import jax.numpy as jnp

    grad = np.asarray(jax.grad(lambda a: jnp.sum(rows_at(a, reg(7), backend="jax") ** 2))(jnp.asarray(X)))
    want = np.zeros(X.shape)
    want[7:135] = 2 * X[7:135].astype(np.float64)
    np.testing.assert_allclose(grad, want, rtol=1e-6)
