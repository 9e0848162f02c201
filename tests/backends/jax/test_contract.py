"""Joining an accumulation over split contraction tiles into one matmul (``nki_dsl/backends/jax/contract.py``):
``acc = S0.T @ M0; acc += S1.T @ M1`` per head, batched over the heads, lowered as one ``dot_general`` over the
joined contraction (128 + 69 = 197 rows) instead of two and an add.

The kernels are the shape of the ViT attention kernel's ``P V`` over a ragged key count. Each is compared with the
lowering with joining off and with the NumPy reference (to float32 rounding: one dot's summation instead of two
dots and an add); the jaxpr says what was joined."""

import jax
import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.jax import contract, reroll
from nki_dsl.backends.jax.program import build, to_held

P = 128


@pytest.fixture(autouse=True)
def _no_reroll(monkeypatch):
    monkeypatch.setattr(reroll, "ENABLED", False)


@nki.jit
def _split_contraction(s, v, acc_dtype=nl.float32, peek: bool = False):
    """``s[h].T @ v[h]`` per head, the contraction (axis 1, ``k`` rows) in tiles of 128 and the rest, accumulated
    into ``acc`` (PSUM fp32, or an SBUF tensor of ``acc_dtype``). With ``peek`` the partial sum after the first
    tile is stored too (``partial``)."""
    heads, k, m = s.shape
    n = v.shape[2]
    out = nl.ndarray((heads, m, n), dtype=s.dtype, buffer=nl.shared_hbm)
    partial = nl.ndarray((heads, m, n), dtype=s.dtype, buffer=nl.shared_hbm) if peek else None
    i_m, i_n = nl.arange(m)[None, :], nl.arange(n)[None, :]
    i_p, i_o = nl.arange(m)[:, None], nl.arange(n)[None, :]
    tiles = [(k0, min(P, k - k0)) for k0 in range(0, k, P)]
    for h in range(heads):
        buffer = nl.psum if acc_dtype == nl.float32 else nl.sbuf
        acc = nl.ndarray((nl.par_dim(m), n), dtype=acc_dtype, buffer=buffer)
        for j, (k0, size) in enumerate(tiles):
            i_k = nl.arange(size)[:, None]
            st = nl.load(s[h, k0 + i_k, i_m])
            mv = nl.load(v[h, k0 + i_k, i_n])
            product = nisa.nc_matmul(st, mv)
            if j == 0:
                acc[i_p, i_o] = product
                if peek:
                    nl.store(partial[h, i_p, i_o], value=nl.copy(acc[i_p, i_o], dtype=s.dtype))
            else:
                acc[i_p, i_o] += product
        nl.store(out[h, i_p, i_o], value=nl.copy(acc[i_p, i_o], dtype=s.dtype))
    return (out, partial) if peek else out


@nki.jit
def _ragged_both(s, v):
    """As ``_split_contraction``, the output rows (``m`` = 197) in tiles too: a 128-row tile and a 69-row one
    under ``rows < m``, which ``stitch`` runs as one op per stage; the joined accumulation is then one of
    stitched pairs."""
    heads, k, m = s.shape
    n = v.shape[2]
    out = nl.ndarray((heads, m, n), dtype=s.dtype, buffer=nl.shared_hbm)
    i_p, i_q, i_o = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(n)[None, :]
    tiles = [(k0, min(P, k - k0)) for k0 in range(0, k, P)]
    for h in range(heads):
        mvs = [nl.load(v[h, k0 + nl.arange(size)[:, None], i_o]) for k0, size in tiles]  # (both row tiles' V)
        for m0 in range(0, m, P):
            rows, cols = m0 + i_p < m, m0 + i_q < m
            acc = nl.ndarray((nl.par_dim(P), n), dtype=nl.float32, buffer=nl.psum)
            for j, (k0, size) in enumerate(tiles):
                i_k = nl.arange(size)[:, None]
                st = nl.load(s[h, k0 + i_k, m0 + i_q], mask=cols)
                mv = mvs[j]
                product = nisa.nc_matmul(st, mv, mask=rows)
                if j == 0:
                    acc[i_p, i_o] = product
                else:
                    acc[i_p, i_o] += product
            nl.store(out[h, m0 + i_p, i_o], value=nl.copy(acc[i_p, i_o], dtype=s.dtype, mask=rows), mask=rows)
    return out


def _inputs(heads=6, k=197, m=32, n=24):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((heads, k, m)).astype(np.float32),
            rng.standard_normal((heads, k, n)).astype(np.float32))  # fmt: skip


def _lowered(ir, args, enabled, monkeypatch):
    monkeypatch.setattr(contract, "ENABLED", enabled)
    _, fn = build(ir)
    held = [to_held(a, p.type) for a, p in zip(args, ir.params)]
    compiled = jax.jit(fn).lower(*held).compile()
    outs = compiled(*held)[0]
    return [np.asarray(o) for o in outs], compiled.as_text()  # (the program XLA runs: what nothing reads is gone)


def _joined_and_not(monkeypatch, **options):
    s, v = _inputs()
    ir = nki.trace(_split_contraction, s, v, **options).ir
    on, text_on = _lowered(ir, (s, v), True, monkeypatch)
    off, text_off = _lowered(ir, (s, v), False, monkeypatch)
    reference = nki.jit(_split_contraction.fn)(s, v, **options)
    reference = reference if isinstance(reference, tuple) else (reference,)
    for got, base, ref in zip(on, off, reference):
        np.testing.assert_allclose(got, base, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(got, np.asarray(ref), rtol=2e-5, atol=2e-5)
    if "acc_dtype" not in options:  # (a bfloat16 accumulator rounds: the reference and the off lowering say what)
        np.testing.assert_allclose(on[0], np.einsum("hkm,hkn->hmn", s, v), rtol=2e-5, atol=2e-5)
    return on, text_on, text_off


def test_an_accumulation_over_a_ragged_contraction_is_one_dot(monkeypatch):
    _, on, off = _joined_and_not(monkeypatch)
    assert (on.count(" dot("), off.count(" dot(")) == (1, 2)


def test_a_partial_sum_read_between_the_tiles_keeps_its_value(monkeypatch):
    outs, on, _ = _joined_and_not(monkeypatch, peek=True)
    s, v = _inputs()
    np.testing.assert_allclose(outs[1], np.einsum("hkm,hkn->hmn", s[:, :P], v[:, :P]), rtol=2e-5, atol=2e-5)
    assert on.count(" dot(") == 2  # the first tile's product is read: it stays, beside the joined one


def test_an_accumulator_that_rounds_between_the_tiles_is_not_joined(monkeypatch):
    _, on, off = _joined_and_not(monkeypatch, acc_dtype=nl.bfloat16)
    assert (on.count(" dot("), off.count(" dot(")) == (2, 2)


def test_the_switch_turns_joining_off(monkeypatch):
    s, v = _inputs()
    ir = nki.trace(_split_contraction, s, v).ir
    monkeypatch.setenv("NKI_JAX_CONTRACT", "0")
    assert _lowered(ir, (s, v), True, monkeypatch)[1].count(" dot(") == 2
    monkeypatch.setenv("NKI_JAX_CONTRACT", "1")
    assert _lowered(ir, (s, v), True, monkeypatch)[1].count(" dot(") == 1


def test_stitched_pairs_accumulating_over_a_ragged_contraction_are_one_dot(monkeypatch):
    s, v = _inputs(m=197)
    ir = nki.trace(_ragged_both, s, v).ir
    (on,), text_on = _lowered(ir, (s, v), True, monkeypatch)
    (off,), text_off = _lowered(ir, (s, v), False, monkeypatch)
    np.testing.assert_allclose(on, off, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(on, np.einsum("hkm,hkn->hmn", s, v), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(on, np.asarray(nki.jit(_ragged_both.fn)(s, v)), rtol=2e-5, atol=2e-5)
    # stitched: one dot per k tile over the 197 rows, then joined: one
    assert (text_on.count(" dot("), text_off.count(" dot(")) == (1, 2)
