"""Batching isomorphic, independent ops of a straight-line run into one op per stage over a lane axis
(``nki_dsl/backends/jax/batching.py``, ``batch_plan.py``).

Each kernel is checked bit for bit against the unbatched lowering (batching switched off): the batched program
computes every element with the same primitives on the same values. Both are compiled without XLA's YNNPACK
fusions (``EXACT``): XLA on CPU hands a dot or a reduction to a YNNPACK kernel chosen by the operands' shapes, and
a [lanes, 128, 8] row sum is then summed in another order than a [128, 8] one (an ulp apart); without them the
two programs agree bit for bit (the ViT attention kernel too). Results are also checked against the NumPy
reference, with its tolerance. The jaxpr says what was batched (one ``exp`` per batched stage)."""

import jax
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.jax import batching, reroll
from nki_dsl.backends.jax.program import build, to_held
from tests.backends.jax.ring_kernels import grad_of_weighted_sum, on_and_off, under_vmap
from tests.backends.jax.ring_kernels import ring_tiles as _ring_tiles
from tests.backends.jax.ring_kernels import running_sum as _running_sum

P = 128


@pytest.fixture(autouse=True)
def _no_reroll(monkeypatch):
    monkeypatch.setattr(reroll, "ENABLED", False)  # (what is not batched stays unrolled: the counts are exact)


def _fresh(kernel):
    return nki.jit(kernel.fn)


EXACT = {"xla_cpu_experimental_ynn_fusion_type": ""}  # (see the module docstring)


def _lowered(ir, args, enabled, monkeypatch):
    """The kernel's outputs from its JAX program, batched or not, compiled by XLA without library fusions, and
    how many ``exp`` its jaxpr holds."""
    monkeypatch.setattr(batching, "ENABLED", enabled)
    _, fn = build(ir)
    held = [to_held(a, p.type) for a, p in zip(args, ir.params)]
    traced = jax.jit(fn).trace(*held)
    outs = traced.lower().compile(compiler_options=EXACT)(*held)[0]
    return [np.asarray(o) for o in outs], str(traced.jaxpr)


def _exps(kernel, args, enabled, monkeypatch) -> int:
    monkeypatch.setattr(batching, "ENABLED", enabled)
    return nki.emit(_fresh(kernel), *args, backend="jax").count(" exp ")


def _check(kernel, args, monkeypatch, exps_batched, exps_unbatched, rtol=2e-6):
    ir = nki.trace(kernel, *args).ir
    on, text = _lowered(ir, args, True, monkeypatch)
    off, plain = _lowered(ir, args, False, monkeypatch)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)  # the same primitives on the same values: the same bits
    ref = np.asarray(_fresh(kernel)(*args))
    np.testing.assert_allclose(on[0], ref, rtol=rtol, atol=1e-6)  # XLA's exp: ulps from NumPy's
    assert (text.count(" exp "), plain.count(" exp ")) == (exps_batched, exps_unbatched)
    return on[0], text



def test_tiles_sharing_ring_slots_run_as_one_op_per_stage(monkeypatch):
    x = np.random.default_rng(0).standard_normal((6 * P, 8)).astype(np.float32)
    got, _ = _check(_ring_tiles, (x,), monkeypatch, exps_batched=1, exps_unbatched=6)
    e = np.exp(x)
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=2e-6)


@nki.jit
def _ragged_slots(x):
    """Tiles of 128 rows and a last one of fewer, each written under ``rows < n`` into ring slot t % 2, then the
    whole slot (all 128 rows) stored unmasked into ``out[t]``: the ragged tile's stored slot holds the rows the
    tile two before it left there, which must come out as program order leaves them."""
    rows, cols = x.shape
    n = (rows + P - 1) // P
    out = nl.ndarray((n, P, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((2, nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    for t in range(n):
        ok = t * P + i_p < rows
        tile = nl.load(x[t * P + i_p, i_f], mask=ok)
        ring[t % 2, i_p, i_f] = nisa.activation(np.exp, tile, mask=ok)
        nl.store(out[t, i_p, i_f], value=nl.multiply(ring[t % 2, i_p, i_f], 2.0))
    return out


def test_a_ragged_tile_reusing_a_slot_reads_the_stale_rows_program_order_leaves(monkeypatch):
    x = np.random.default_rng(1).standard_normal((5 * P + 40, 8)).astype(np.float32)
    got, _ = _check(_ragged_slots, (x,), monkeypatch, exps_batched=2, exps_unbatched=6)
    e = 2 * np.exp(np.concatenate([x, np.zeros((P - 40, 8), np.float32)]).reshape(6, P, 8))
    np.testing.assert_allclose(got[:5], e[:5], rtol=2e-6)
    np.testing.assert_allclose(got[5, :40], e[5, :40], rtol=2e-6)
    np.testing.assert_allclose(got[5, 40:], e[3, 40:], rtol=2e-6)  # slot 1's rows from tile 3



def test_chains_reading_an_earlier_chains_writes_stay_in_order(monkeypatch):
    x = np.random.default_rng(2).standard_normal((6 * P, 8)).astype(np.float32)
    # the six exps are independent (one batched op); the five adds depend on each other (five ops)
    got, text = _check(_running_sum, (x,), monkeypatch, exps_batched=1, exps_unbatched=6, rtol=1e-5)
    np.testing.assert_allclose(got, np.cumsum(np.exp(x).reshape(6, P, 8), axis=0).reshape(6 * P, 8), rtol=1e-5)
    assert text.count(" add ") >= 5


@nki.jit
def _odd_one_out(x, which: int = 3):
    """Like ``_ring_tiles`` but tile ``which`` rounds its exp to bfloat16 (and a last tile of fewer rows has
    another shape): ops like the others but for one dtype or shape, which must not join their batch."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ring = nl.ndarray((3, nl.par_dim(P), cols), dtype=nl.float32, buffer=nl.sbuf)
    i_f = nl.arange(cols)[None, :]
    for t in range((rows + P - 1) // P):
        i_p = nl.arange(min(P, rows - t * P))[:, None]
        dtype = nl.bfloat16 if t == which else nl.float32
        ring[t % 3, i_p, i_f] = nl.exp(nl.load(x[t * P + i_p, i_f]), dtype=dtype)
        nl.store(out[t * P + i_p, i_f], value=nl.multiply(ring[t % 3, i_p, i_f], 0.5))
    return out


@pytest.mark.slow  # (~1.5 s; the default run has the ring-slot, ragged and chain kernels)
def test_an_op_with_another_dtype_or_shape_is_not_merged(monkeypatch):
    x = np.random.default_rng(4).standard_normal((7 * P + 64, 8)).astype(np.float32)
    # the six float32 tiles of 128 rows are one exp; the bfloat16 one and the 64-row one stay apart
    got, _ = _check(_odd_one_out, (x,), monkeypatch, exps_batched=3, exps_unbatched=8)
    np.testing.assert_array_equal(got[3 * P:4 * P], (np.asarray(jax.numpy.asarray(np.exp(x[3 * P:4 * P]),
                                                     jax.numpy.bfloat16), np.float32) * 0.5))  # fmt: skip


@nki.jit
def _scaled_bf16_tiles(x):
    """bfloat16 tiles loaded into a bfloat16 tensor, then each scaled by a Python number on the Scalar engine: the
    scaling stage reads what the load stage's lanes wrote, which must be held as the unbatched program holds it
    (fp32 values rounded to bfloat16), or the multiply runs in bfloat16 with the scale rounded to it (0.3 as
    0.30078125)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = nl.ndarray((rows // P, nl.par_dim(P), cols), dtype=x.dtype, buffer=nl.sbuf)
    i_p, i_f = nl.arange(P)[:, None], nl.arange(cols)[None, :]
    for t in range(rows // P):
        tiles[t, i_p, i_f] = nl.load(x[t * P + i_p, i_f])
        scaled = nisa.activation(nl.copy, tiles[t, i_p, i_f], scale=0.3, dtype=x.dtype)
        nl.store(out[t * P + i_p, i_f], value=scaled)
    return out


def test_a_stage_reading_an_earlier_stages_bfloat16_tiles_computes_in_fp32_like_the_unbatched_ops(monkeypatch):
    x = np.random.default_rng(9).standard_normal((6 * P, 64)).astype(np.float32).astype(nl.bfloat16)
    ir = nki.trace(_scaled_bf16_tiles, x).ir
    on, text = _lowered(ir, (x,), True, monkeypatch)
    off, plain = _lowered(ir, (x,), False, monkeypatch)
    assert (text.count(" mul "), plain.count(" mul ")) == (1, 6)  # (the six scalings are one batched op)
    np.testing.assert_array_equal(on[0], off[0])
    # nki.md: data * scale in fp32, rounded once to the tile's dtype (as the NumPy reference computes it)
    want = (x.astype(np.float32) * np.float32(0.3)).astype(nl.bfloat16)
    np.testing.assert_array_equal(on[0], want)
    np.testing.assert_array_equal(np.asarray(_fresh(_scaled_bf16_tiles)(x)), want)


def test_the_switch_turns_batching_off(monkeypatch):
    x = np.random.default_rng(5).standard_normal((6 * P, 8)).astype(np.float32)
    monkeypatch.setenv("NKI_JAX_BATCH", "0")
    assert _exps(_ring_tiles, (x,), True, monkeypatch) == 6
    monkeypatch.setenv("NKI_JAX_BATCH", "1")
    assert _exps(_ring_tiles, (x,), True, monkeypatch) == 1


def test_a_write_unlike_the_prediction_falls_back_to_the_unbatched_ops():
    from nki_dsl.backends.jax.batch_plan import RESULT, Probe

    predicted = Probe(("data",), ((RESULT, None), ("reduce_res", np.array([[True], [False]]))))
    assert batching._matches(predicted, [(RESULT, 0, None), ("reduce_res", 0, np.array([[True], [False]]))])
    assert not batching._matches(predicted, [(RESULT, 0, None), ("reduce_res", 0, None)])
    assert not batching._matches(predicted, [(RESULT, 0, None)])


@pytest.mark.slow
def test_gradients_through_a_batched_kernel_are_the_unbatched_ones(monkeypatch):
    x = np.random.default_rng(7).standard_normal((6 * P, 8)).astype(np.float32)
    grads = on_and_off(batching, monkeypatch, _ring_tiles, lambda k: grad_of_weighted_sum(k, x))
    # (XLA sums the batched row sums with a library kernel: an ulp apart, which the backward pass amplifies)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=2e-6)


@pytest.mark.slow
def test_a_batched_kernel_under_the_users_vmap(monkeypatch):
    xs = np.random.default_rng(8).standard_normal((2, 5 * P + 40, 8)).astype(np.float32)
    outs = on_and_off(batching, monkeypatch, _ragged_slots, lambda k: under_vmap(k, xs))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)
    ref = np.asarray(_fresh(_ragged_slots)(xs[1]))
    np.testing.assert_allclose(outs[0][1], ref, rtol=2e-6)
