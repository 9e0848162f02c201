"""What the JAX lowering does to make XLA's job small, each checked against the NumPy reference: loops of
independent iterations become one batched computation (``vectorise``), loops whose iterations depend on each other
stay loops, writes at trace-time positions are forwarded to later reads (``forward``; a read provably apart from a
write at the loop index passes it by), and an output written tile by tile is assembled by one concatenation."""

import re

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl


def both(kernel, *args):
    return np.asarray(kernel(*args)), np.asarray(kernel(*args, backend="jax"))


@nki.jit
def _prefix_of_tiles(x):
    """out tile t = x tile t + out tile t - 1: every iteration reads what the previous one wrote."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    nl.store(out[nl.arange(128)[:, None], i_f], value=nl.load(x[nl.arange(128)[:, None], i_f]))
    for t in nl.sequential_range(1, rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        prev = nl.load(out[i_p - 128, i_f])
        nl.store(out[i_p, i_f], value=nl.add(nl.load(x[i_p, i_f]), prev))
    return out


def test_a_loop_whose_iterations_read_each_others_writes_stays_a_loop():
    x = np.random.default_rng(0).standard_normal((512, 32)).astype(np.float32)
    ref, got = both(_prefix_of_tiles, x)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got[384:], x.reshape(4, 128, 32).sum(axis=0), rtol=1e-5, atol=1e-5)
    text = nki.emit(_prefix_of_tiles, x, backend="jax")
    assert "scan" in text or "while" in text  # lax.fori_loop


@nki.jit
def _overlapping_windows(x):
    """Tile t reads rows 64 t ... 64 t + 127 (windows overlap) and writes rows 64 t ... 64 t + 63 of out."""
    rows, cols = x.shape
    out = nl.ndarray((rows - 64, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range(rows // 64 - 1):
        window = nl.load(x[t * 64 + nl.arange(128)[:, None], i_f])
        total = nl.sum(window, axis=0, keepdims=True)
        nl.store(out[t * 64 + nl.arange(64)[:, None], i_f], value=total.broadcast_to((64, cols)))
    return out


def test_independent_iterations_reading_overlapping_windows_run_batched():
    x = np.random.default_rng(1).standard_normal((384, 16)).astype(np.float32)
    ref, got = both(_overlapping_windows, x)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)  # XLA's sum order: ulps from NumPy's
    text = nki.emit(_overlapping_windows, x, backend="jax")
    assert "scan" not in text and "while" not in text


@nki.jit
def _doubled_past_the_first_tile(x):
    """x without its first 128 rows, doubled: a loop over tiles 1 ... rows / 128 - 1 (it starts at 1)."""
    out = nl.ndarray((x.shape[0] - 128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(1, x.shape[0] // 128):
        i_p, i_f = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
        nl.store(out[(t - 1) * 128 + i_p, i_f], value=nl.multiply(nl.load(x[t * 128 + i_p, i_f]), 2.0))
    return out


def test_a_batched_loop_that_does_not_start_at_zero_runs_its_own_iterations():
    x = np.random.default_rng(4).standard_normal((512, 16)).astype(np.float32)
    ref, got = both(_doubled_past_the_first_tile, x)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, 2 * x[128:])
    text = nki.emit(_doubled_past_the_first_tile, x, backend="jax")
    assert "scan" not in text and "while" not in text  # batched, not a lax.fori_loop


@nki.jit
def _tile_plus_the_first(x):
    """out tile t = x tile t + x tile 0 + out tile t - 1, through a scratch buffer wider than x written at tile 0
    and at tile t: a loop that stays a loop (each iteration reads the previous one's store)."""
    tiles = x.shape[1] // 16
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(16)[None, :]
    nl.store(out[i_p, i_f], value=nl.load(x[i_p, i_f]))
    for t in nl.sequential_range(1, tiles):
        scratch = nl.ndarray((128, (tiles + 1) * 16), dtype=nl.float32)
        scratch[i_p, i_f] = nl.load(x[i_p, i_f])
        scratch[i_p, t * 16 + i_f] = nl.load(x[i_p, t * 16 + i_f])
        both_tiles = nl.add(scratch[i_p, i_f], scratch[i_p, t * 16 + i_f])
        nl.store(out[i_p, t * 16 + i_f], value=nl.add(both_tiles, nl.load(out[i_p, (t - 1) * 16 + i_f])))
    return out


def test_a_read_disjoint_from_a_write_at_the_loop_index_is_forwarded_and_the_buffer_never_built():
    x = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    ref, got = both(_tile_plus_the_first, x)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    text = nki.emit(_tile_plus_the_first, x, backend="jax")
    assert "scan" in text or "while" in text  # a lax.fori_loop: the write at t has a traced start
    # the read of tile 0 lies apart from the write at t >= 1 (t's range says so): both reads take the written
    # tiles, and nothing reads the scratch buffer (128 x 80) as a whole, so no update ever builds it
    assert "f32[128,80]" in text and not re.search(r"f32\[128,80\] = dynamic_update_slice", text)


@nki.jit
def _halves(x):
    """A buffer written in two halves and read whole, then one half read back: forwarded and straddling reads."""
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((128, 64), dtype=nl.float32)
    i_p = nl.arange(128)[:, None]
    buf[i_p, nl.arange(32)[None, :]] = nl.load(x[i_p, nl.arange(32)[None, :]])
    buf[i_p, 32 + nl.arange(32)[None, :]] = nl.exp(nl.load(x[i_p, 32 + nl.arange(32)[None, :]]))
    whole = nl.multiply(buf, 2.0)
    nl.store(out, value=nl.add(whole, buf[i_p, nl.arange(64)[None, :]]))
    return out


def test_reads_of_a_buffer_written_in_parts_match_the_reference():
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    ref, got = both(_halves, x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=0)  # XLA's exp: ulps from NumPy's


@nki.jit
def _two_tiles(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(x.shape[1])[None, :]
    for t in range(2):  # unrolled by the tracer: two stores at trace-time positions
        i_p = t * 128 + nl.arange(128)[:, None]
        nl.store(out[i_p, i_f], value=nl.multiply(nl.load(x[i_p, i_f]), 3.0))
    return out


def test_an_output_written_tile_by_tile_is_one_concatenation():
    x = np.random.default_rng(3).standard_normal((256, 8)).astype(np.float32)
    ref, got = both(_two_tiles, x)
    np.testing.assert_array_equal(got, ref)
    text = nki.emit(_two_tiles, x, backend="jax")
    assert "concatenate" in text and "dynamic_update_slice" not in text
