"""Loop-carried state: ``sequential_range`` and ``static_range`` with on-chip tensors updated in place
(``m[...] = nl.maximum(m, x)``), and ``nl.loop_reduce`` across ``affine_range`` iterations."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.language.support import BF16, F32, assert_ulps, exact, rand, rounded


@nki.jit
def running_kernel(x, loop):
    """Per 64-column block j: the running row maximum and the running row sum up to block j (a prefix scan)."""
    n_blocks = x.shape[1] // 64
    m = nl.full((128, 1), nl.fp32.min, dtype=nl.float32)
    s = nl.zeros((128, 1), dtype=x.dtype)
    out_m = nl.ndarray((128, n_blocks), dtype=nl.float32, buffer=nl.shared_hbm)
    out_s = nl.ndarray((128, n_blocks), dtype=x.dtype, buffer=nl.shared_hbm)
    iterate = nl.sequential_range if loop == "sequential" else nl.static_range
    for j in iterate(n_blocks):
        tile = nl.load(x[:, nl.ds(j * 64, 64)])
        m[...] = nl.maximum(m, nl.max(tile, axis=1, keepdims=True))
        s[...] = s + nl.sum(tile, axis=1, keepdims=True)
        nl.store(out_m[:, nl.ds(j, 1)], value=m)
        nl.store(out_s[:, nl.ds(j, 1)], value=s)
    return out_m, out_s


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("loop", ["sequential", "static"])
def test_loop_carried_state(loop, dtype):
    x = rand((128, 512), dtype, -2, 2, seed=1)
    got_m, got_s = running_kernel(x, loop)
    blocks = exact(x).reshape(128, 8, 64)
    np.testing.assert_array_equal(got_m, np.maximum.accumulate(blocks.max(axis=2), axis=1))
    # The running sum rounds to the tile dtype after every block, in order.
    want = np.zeros((128, 8))
    acc = np.zeros(128)
    for j in range(8):
        block_sum = rounded(blocks[:, j].sum(axis=1), dtype)  # each block sum is an op rounded to its dtype
        acc = exact(rounded(acc + exact(block_sum), dtype))
        want[:, j] = acc
    assert_ulps(got_s, want, dtype, ulps=1, atol=64 * 2 * 2.0**-23 * 8, what=f"{loop} running sum")


@nki.jit
def static_unroll_kernel(x):
    """static_range gives Python ints: ordinary Python control flow and list indexing work on them."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    scales = [1.0, -1.0, 0.5, 2.0]
    for j in nl.static_range(4):
        tile = nl.load(x[:, j * 16:(j + 1) * 16])
        if j % 2 == 0:
            tile = nl.exp(tile)
        nl.store(out[:, j * 16:(j + 1) * 16], value=tile * scales[j])
    return out


def test_static_range_unrolls_with_python_ints():
    x = rand((128, 64), F32, seed=2)
    want = exact(x).copy()
    for j, scale in enumerate([1.0, -1.0, 0.5, 2.0]):
        block = want[:, j * 16:(j + 1) * 16]
        want[:, j * 16:(j + 1) * 16] = (np.exp(block) if j % 2 == 0 else block) * scale
    assert_ulps(static_unroll_kernel(x), want, F32, ulps=2, what="static_range")


@nki.jit
def loop_reduce_kernel(x, op, dtype):
    """The op-reduction of the [128, 64] blocks of x (stacked along rows) across two nested loops."""
    n_outer, n_inner = x.shape[0] // 256, 2
    for i in nl.affine_range(n_outer):
        for j in nl.affine_range(n_inner):
            tile = nl.load(x[nl.ds((i * n_inner + j) * 128, 128), :])
            reduced = nl.loop_reduce(tile, op=op, loop_indices=[i, j], dtype=dtype)
    out = nl.ndarray((128, x.shape[1]), dtype=reduced.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=reduced)
    return out


LOOP_REDUCE = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min}
LOOP_REDUCE_OPS = [("add", "add"), ("multiply", "multiply"), (np.maximum, "maximum"), (nl.minimum, "minimum"),
                   (np.max, "maximum")]  # fmt: skip


@pytest.mark.parametrize(("op", "name"), LOOP_REDUCE_OPS, ids=[f"{n}-{type(o).__name__}" for o, n in LOOP_REDUCE_OPS])
def test_loop_reduce(op, name):
    x = rand((6 * 128, 64), F32, 0.5, 1.5, seed=3)
    got = loop_reduce_kernel(x, op, None)
    want = LOOP_REDUCE[name](exact(x).reshape(6, 128, 64), axis=0)
    assert_ulps(got, want, F32, ulps=4, what=f"loop_reduce({name})")


def test_loop_reduce_dtype_and_integer_identity():
    # An int32 maximum starts from the int32 minimum, not from 0: all-negative inputs still reduce correctly.
    x = np.random.default_rng(4).integers(-1000, -1, size=(4 * 128, 64)).astype(np.int32)
    got = loop_reduce_kernel(x, "maximum", None)
    np.testing.assert_array_equal(got, x.reshape(4, 128, 64).max(axis=0))
    xb = x.astype(BF16)
    summed = loop_reduce_kernel(xb, "add", "float32")  # bf16 tiles summed into fp32: exact for 4 such values
    assert summed.dtype == F32
    np.testing.assert_array_equal(summed, exact(xb).reshape(4, 128, 64).sum(axis=0))


@nki.jit
def loop_reduce_misuse_kernel(x):
    tile = nl.load(x)
    return nl.loop_reduce(tile, np.add, loop_indices=[0])  # 0 is not the index of an enclosing loop


@backend_independent
def test_loop_reduce_needs_enclosing_loop_indices():
    with pytest.raises(nki.NkiApiError, match="loop_indices must be indices of enclosing"):
        loop_reduce_misuse_kernel(np.ones((128, 8), F32))
