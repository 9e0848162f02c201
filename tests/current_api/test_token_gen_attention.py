"""Token-generation (decode) attention with a KV cache, in the current API and in the style of a production
kernel library: the new token's K and V are written into the caches (kernel parameters updated in place), then
each head attends over the ``pos + 1`` cached positions. With ``kernel[2]`` the heads are split across the two
logical NeuronCores by ``nl.program_id(0)`` (no data crosses cores). Checked against float64 NumPy on both
backends, for lnc 1 and 2."""

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from tests.current_api.attention_steps import scores, weighted_values


@nki.jit
def decode_attention(qT, k_new, v_new, k_cache, v_cache, pos):
    """qT [D, H] (head dim on partitions), k_new/v_new [H, D], caches [H, S, D]; returns out [H, D]."""
    D, H = qT.shape
    L = pos + 1  # positions attended to, the new one included
    out = nl.ndarray((H, D), qT.dtype, buffer=nl.shared_hbm)
    heads = H // nl.num_programs()
    q_all = nl.ndarray((D, H), qT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=q_all, src=qT)
    for h in nl.affine_range(heads):
        head = nl.program_id(0) * heads + h
        # KV cache update: this token's K and V go to row `pos` of the head's caches.
        row = nl.ndarray((1, D), k_new.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=k_new[nl.ds(head, 1), :])
        nisa.dma_copy(dst=k_cache[head, pos:pos + 1, :], src=row)
        vrow = nl.ndarray((1, D), v_new.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=vrow, src=v_new[nl.ds(head, 1), :])
        nisa.dma_copy(dst=v_cache[head, pos:pos + 1, :], src=vrow)
        # scores [1, L] = q_h . K_h^T / sqrt(D)
        s_psum = scores(q_all[:, nl.ds(head, 1)], k_cache[head, 0:L, :], L, D, k_cache.dtype)
        # softmax along the free axis, in fp32
        neg_max = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=s_psum, axis=1, negate=True, keepdims=True)
        nisa.tensor_scalar(dst=neg_max, data=neg_max, op0=nl.multiply, operand0=1.0 / np.sqrt(D))
        p = nl.ndarray((1, L), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=p, op=nl.exp, data=s_psum, bias=neg_max, scale=1.0 / np.sqrt(D), reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        nisa.tensor_scalar(dst=p, data=p, op0=nl.multiply, operand0=inv)
        # out_h [1, D] = p [1, L] @ V_h [L, D]
        o_psum = weighted_values(p, v_cache[head, 0:L, :], L, D)
        o = nl.ndarray((1, D), out.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=o_psum)
        nisa.dma_copy(dst=out[nl.ds(head, 1), :], src=o)
    return out


def _inputs(H=4, S=128, D=64, pos=100, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    k_cache, v_cache = f(H, S, D), f(H, S, D)
    k_cache[:, pos:], v_cache[:, pos:] = np.nan, np.nan  # not yet written: must not be read
    return f(D, H), f(H, D), f(H, D), k_cache, v_cache, pos


def _expected(qT, k_new, v_new, k_cache, v_cache, pos):
    k, v = k_cache.astype(np.float64).copy(), v_cache.astype(np.float64).copy()
    k[:, pos], v[:, pos] = k_new, v_new
    L, D = pos + 1, qT.shape[0]
    s = np.einsum("dh,hld->hl", qT.astype(np.float64), k[:, :L]) / np.sqrt(D)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return np.einsum("hl,hld->hd", p, v[:, :L]), k, v


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
@pytest.mark.parametrize("lnc", [1, 2])
def test_decode_attention_updates_the_cache_and_attends(lnc, backend):
    qT, k_new, v_new, k_cache, v_cache, pos = _inputs()
    expected, k_after, v_after = _expected(qT, k_new, v_new, k_cache, v_cache, pos)
    launch = decode_attention[lnc] if backend == "numpy" else nki.simulate(decode_attention)[lnc]
    out = launch(qT, k_new, v_new, k_cache, v_cache, pos)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(k_cache[:, : pos + 1], k_after[:, : pos + 1])  # written in place
    np.testing.assert_array_equal(v_cache[:, : pos + 1], v_after[:, : pos + 1])


def test_lnc2_splits_the_heads_across_cores():
    import nki_dsl

    ir = nki_dsl.trace(decode_attention[2], *_inputs()).ir
    (loop,) = [s for s, _ in ir.walk() if hasattr(s, "trip_count")]
    assert ir.grid == (2,) and loop.trip_count == 2  # two heads per core, the loop traced once
