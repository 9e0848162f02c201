"""Stitching a batched group of full tiles to the group of their ragged twins (``nki_dsl/backends/jax/stitch.py``):
one op over the rows laid end to end (128 + 69) instead of two.

The kernels here are the shape of the ViT attention kernel's per-head chain over a ragged sequence: per head, a
128-row tile and a 69-row one (``rows < seq`` on every op), scores by ``nc_matmul`` against the head's own
operand, an exp, a store. Each is checked bit for bit against the unstitched lowering (both compiled without
XLA's YNNPACK fusions, as in test_batching.py: those pick a summation order by shape) and against the NumPy
reference; the jaxpr says what was stitched (one ``exp`` and one ``dot_general`` per stage instead of two)."""

import jax
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.jax import reroll, stitch
from nki_dsl.backends.jax.program import build, to_held

P = 128
EXACT = {"xla_cpu_experimental_ynn_fusion_type": ""}


@pytest.fixture(autouse=True)
def _no_reroll(monkeypatch):
    monkeypatch.setattr(reroll, "ENABLED", False)


@nki.jit
def _ragged_heads(qT, kT, shift: int = 0, q_shift: int = 0):
    """``exp(q_h k_h^T)`` per head over a ragged sequence: qT [H, D, S], kT [H, D, N] -> [H, S, N]. Every
    query tile of head h multiplies by head h's keys; with ``shift`` the ragged tile takes head h + shift's (its
    matmul then shares no operand with the full tile's: it must not be stitched to it); with ``q_shift`` the
    ragged tile loads head h + q_shift's queries (not adjacent to the full tile's in HBM: two reads, joined)."""
    heads, d, seq = qT.shape
    n = kT.shape[2]
    out = nl.ndarray((heads, seq, n), dtype=qT.dtype, buffer=nl.shared_hbm)
    i_d, i_p = nl.arange(d)[:, None], nl.arange(P)[:, None]
    i_q, i_n = nl.arange(P)[None, :], nl.arange(n)[None, :]
    k_sb = nl.ndarray((heads, nl.par_dim(d), n), dtype=qT.dtype, buffer=nl.sbuf)
    for h in range(heads):
        k_sb[h, i_d, i_n] = nl.load(kT[h, i_d, i_n])
    for h in range(heads):
        for t in range((seq + P - 1) // P):
            q0 = t * P
            rows, cols = q0 + i_p < seq, q0 + i_q < seq
            hq = (h + q_shift) % heads if q0 + P > seq else h
            q = nl.load(qT[hq, i_d, q0 + i_q], mask=cols)
            g = (h + shift) % heads if q0 + P > seq else h
            s = nisa.nc_matmul(q, k_sb[g, i_d, i_n], mask=rows)
            e = nisa.activation(np.exp, s, mask=rows)
            nl.store(out[h, q0 + i_p, i_n], value=e, mask=rows)
    return out


def _lowered(ir, args, enabled, monkeypatch):
    monkeypatch.setattr(stitch, "ENABLED", enabled)
    _, fn = build(ir)
    held = [to_held(a, p.type) for a, p in zip(args, ir.params)]
    traced = jax.jit(fn).trace(*held)
    out = traced.lower().compile(compiler_options=EXACT)(*held)[0][0]
    return np.asarray(out), str(traced.jaxpr)


def _inputs(heads=6, d=16, seq=197, n=24):
    rng = np.random.default_rng(0)
    qT = (rng.standard_normal((heads, d, seq)) / 4).astype(np.float32)
    kT = (rng.standard_normal((heads, d, n)) / 4).astype(np.float32)
    return qT, kT


def _reference(qT, kT, shift=0, q_shift=0):
    heads, _, seq = qT.shape
    k = np.stack([kT[(h + shift) % heads] for h in range(heads)])
    q = np.stack([qT[(h + q_shift) % heads] for h in range(heads)])
    s = np.einsum("hds,hdn->hsn", qT, kT).astype(np.float32)
    s[:, P:] = np.einsum("hds,hdn->hsn", q[:, :, P:], k)
    return np.exp(s)


def _stitched_and_not(shift, monkeypatch, q_shift=0):
    qT, kT = _inputs()
    ir = nki.trace(_ragged_heads, qT, kT, shift, q_shift).ir
    on, text_on = _lowered(ir, (qT, kT), True, monkeypatch)
    off, text_off = _lowered(ir, (qT, kT), False, monkeypatch)
    np.testing.assert_array_equal(on, off)  # the same primitives on the same operand elements: the same bits
    np.testing.assert_allclose(on, _reference(qT, kT, shift, q_shift), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(on, np.asarray(nki.jit(_ragged_heads.fn)(qT, kT, shift, q_shift)), rtol=2e-6,
                               atol=1e-6)  # fmt: skip
    return text_on, text_off


def test_a_full_tile_and_its_ragged_twin_run_as_one_op_per_stage(monkeypatch):
    on, off = _stitched_and_not(0, monkeypatch)
    assert (on.count(" exp "), off.count(" exp ")) == (1, 2)
    assert (on.count("dot_general["), off.count("dot_general[")) == (1, 2)
    # the first stitched stage (the loads) reads its two tiles, adjacent in HBM, as one slice (``Stitch.whole``;
    # laid end to end it was one concatenation more); the stages after it read the joined rows of the stage before
    # (``Stitch.direct``; cut and joined again at every stage it was 3 more here)
    assert on.count("concatenate[") <= off.count("concatenate[")


def test_a_ragged_tile_reading_another_operand_is_not_stitched_there(monkeypatch):
    on, off = _stitched_and_not(1, monkeypatch)
    # the matmuls share no operand (head h's keys against head h + 1's): two; the exps after them still stitch
    assert (on.count("dot_general["), off.count("dot_general[")) == (2, 2)
    assert (on.count(" exp "), off.count(" exp ")) == (1, 2)


def test_tiles_not_adjacent_before_the_run_are_read_apart_and_joined(monkeypatch):
    on, off = _stitched_and_not(0, monkeypatch, q_shift=1)
    # the loads still run as one op, on two reads laid end to end (one concatenation more than unstitched)
    assert on.count("concatenate[") == off.count("concatenate[") + 1
    assert (on.count(" exp "), off.count(" exp ")) == (1, 2)


def test_the_switch_turns_stitching_off(monkeypatch):
    qT, kT = _inputs()
    monkeypatch.setenv("NKI_JAX_STITCH", "0")
    assert nki.emit(nki.jit(_ragged_heads.fn), qT, kT, backend="jax").count(" exp ") == 2
    monkeypatch.setenv("NKI_JAX_STITCH", "1")
    assert nki.emit(nki.jit(_ragged_heads.fn), qT, kT, backend="jax").count(" exp ") == 1
