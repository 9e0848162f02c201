"""LNC=2 kernels whose cores work together (reference/nki.md §2.7 "Multi-core"): a token-generation attention
whose two cores each attend over half of the KV cache and combine their partial softmaxes through
``nisa.sendrecv`` (flash decoding), a ring all-reduce of two cores, shared-HBM exchanges ordered by
``nisa.core_barrier``, and the simulator's cores waiting for each other. Against float64 NumPy on the NumPy
reference, the simulator and JAX."""

import re

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.isa as legacy_isa
from nki_dsl.errors import NkiVerificationError
from tests.current_api import lnc_kernels
from tests.current_api.attention_steps import scores, weighted_values

BACKENDS = ["numpy", "simulator", "jax"]


def _run(kernel, backend, *args):
    if backend == "simulator":
        return nki.simulate(kernel)[2](*args)
    return np.asarray(kernel[2](*args, backend=backend))


# -- token generation: the KV cache split across the cores, the softmax combined through sendrecv ----------------
@nki.jit
def split_kv_decode(qT, k_cache, v_cache, pos):
    """qT [D, H], caches [H, S, D]; attends over positions 0..pos (an even count), core c over half c of them.
    Each core's partial result per head (unnormalised output, row max, row sum) goes to the other core, and both
    combine the two halves: out[c] is the whole attention [H, D] as core c computed it."""
    D, H = qT.shape
    L = pos + 1
    assert L % 2 == 0, "the positions split into two equal halves"
    half = L // 2
    scale = 1.0 / np.sqrt(D)
    c = nl.program_id(0)
    out = nl.ndarray((2, H, D), nl.float32, buffer=nl.shared_hbm)
    q = nl.ndarray((D, H), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=q, src=qT)
    partial = nl.ndarray((H, D + 2), nl.float32, buffer=nl.sbuf)  # per head: o (D), max, sum
    for h in nl.affine_range(H):
        s = scores(q[:, nl.ds(h, 1)], k_cache[h, nl.ds(c * half, half), :], half, D)
        m = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=m, op=nl.maximum, data=s, axis=1, keepdims=True)
        bias = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=bias, data=m, op0=nl.multiply, operand0=-scale)
        p = nl.ndarray((1, half), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=p, op=nl.exp, data=s, bias=bias, scale=scale, reduce_op=nl.add, reduce_res=total,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        o = weighted_values(p, v_cache[h, nl.ds(c * half, half), :], half, D)
        nisa.tensor_copy(dst=partial[nl.ds(h, 1), 0:D], src=o)
        nisa.tensor_copy(dst=partial[nl.ds(h, 1), D:D + 1], src=m)
        nisa.tensor_copy(dst=partial[nl.ds(h, 1), D + 1:D + 2], src=total)
    # the cross-core reduction: one exchange of every head's partial result
    peer = nl.ndarray((H, D + 2), nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=partial, dst=peer, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
    both_max = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=both_max, data1=partial[:, D:D + 1], data2=peer[:, D:D + 1], op=nl.maximum)
    weights = []
    for side in (partial, peer):  # exp(scale * (max_side - max)): each half's softmax rescaled to the joint max
        d = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=d, data1=side[:, D:D + 1], data2=both_max, op=nl.subtract)
        w = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=w, op=nl.exp, data=d, scale=scale)
        weights.append(w)
    num = nl.ndarray((H, D), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=num, data=partial[:, 0:D], op0=nl.multiply, operand0=weights[0])
    num2 = nl.ndarray((H, D), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=num2, data=peer[:, 0:D], op0=nl.multiply, operand0=weights[1])
    nisa.tensor_tensor(dst=num, data1=num, data2=num2, op=nl.add)
    den = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=den, data1=partial[:, D + 1:D + 2], data2=weights[0], op=nl.multiply)
    den2 = nl.ndarray((H, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=den2, data1=peer[:, D + 1:D + 2], data2=weights[1], op=nl.multiply)
    nisa.tensor_tensor(dst=den, data1=den, data2=den2, op=nl.add)
    nisa.reciprocal(dst=den, data=den)
    nisa.tensor_scalar(dst=num, data=num, op0=nl.multiply, operand0=den)
    nisa.dma_copy(dst=out[c], src=num)
    return out


def _decode_inputs(H=4, S=128, D=64, pos=99, seed=0):
    rng = np.random.default_rng(seed)
    qT = rng.standard_normal((D, H)).astype(np.float32)
    k_cache, v_cache = (rng.standard_normal((H, S, D)).astype(np.float32) for _ in range(2))
    k_cache[:, pos + 1:], v_cache[:, pos + 1:] = np.nan, np.nan  # not yet written: must not be read
    return qT, k_cache, v_cache, pos


def _decode_expected(qT, k_cache, v_cache, pos):
    L, D = pos + 1, qT.shape[0]
    k, v = k_cache[:, :L].astype(np.float64), v_cache[:, :L].astype(np.float64)
    s = np.einsum("dh,hld->hl", qT.astype(np.float64), k) / np.sqrt(D)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return np.einsum("hl,hld->hd", p / p.sum(axis=1, keepdims=True), v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_kv_decode_attention_combines_both_cores_halves(backend):
    args = _decode_inputs()
    out = _run(split_kv_decode, backend, *args)
    expected = _decode_expected(*args)
    np.testing.assert_allclose(out, np.stack([expected, expected]), rtol=1e-5, atol=1e-5)


def test_each_core_attends_over_its_own_half_only():
    # without the other half the answer is wrong: the exchange is what completes each core's result
    qT, k_cache, v_cache, pos = _decode_inputs()
    half = (pos + 1) // 2
    out = split_kv_decode[2](qT, k_cache, v_cache, pos)
    only_first = _decode_expected(qT, k_cache[:, :half], v_cache[:, :half], half - 1)
    assert not np.allclose(out[0], only_first, atol=1e-3)


# -- a ring all-reduce of two cores ------------------------------------------------------------------------------
@nki.jit
def ring_all_reduce(x):
    """x [2, R, F] (R a multiple of 128, F even): core c holds x[c]; out[c] = x[0] + x[1]. Per row tile, the ring
    of two cores: reduce-scatter (core c sends the half of the columns the peer owns and adds the peer's copy of
    its own half), then all-gather (each core sends its reduced half and receives the other)."""
    _, R, F = x.shape
    half = F // 2
    c = nl.program_id(0)
    out = nl.ndarray((2, R, F), nl.float32, buffer=nl.shared_hbm)
    for r in nl.affine_range(R // 128):
        t = nl.ndarray((128, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c, nl.ds(r * 128, 128), :])
        got = nl.ndarray((128, half), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t[:, nl.ds((1 - c) * half, half)], dst=got, send_to_rank=1 - c, recv_from_rank=1 - c,
                      pipe_id=0)
        mine = t[:, nl.ds(c * half, half)]
        nisa.tensor_tensor(dst=mine, data1=mine, data2=got, op=nl.add)  # this core's half, reduced
        nisa.sendrecv(src=mine, dst=t[:, nl.ds((1 - c) * half, half)], send_to_rank=1 - c, recv_from_rank=1 - c,
                      pipe_id=1)
        nisa.dma_copy(dst=out[c, nl.ds(r * 128, 128), :], src=t)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_ring_all_reduce_of_two_cores(backend):
    x = np.random.default_rng(5).standard_normal((2, 384, 96)).astype(np.float32)
    out = _run(ring_all_reduce, backend, x)
    total = x.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(out, np.stack([total, total]), rtol=1e-6, atol=1e-6)


# -- barriers order the shared-HBM accesses ----------------------------------------------------------------------
def _iterated_swap(second_barrier: bool):
    @nki.jit
    def swap_rounds(x):
        """Each round, core c publishes its running tile in a shared scratch, waits, adds the peer's published
        tile to its own; after 3 rounds each core holds 2^2 (x0 + x1). The second barrier of a round keeps a core
        from publishing the next round before its peer has read this one (the write-after-read order)."""
        _, P, F = x.shape
        c = nl.program_id(0)
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        scratch = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=x[c])
        for _ in nl.sequential_range(3):
            nisa.dma_copy(dst=scratch[c], src=acc)
            nisa.core_barrier(scratch, (0, 1))
            other = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=other, src=scratch[1 - c])
            if second_barrier:
                nisa.core_barrier(scratch, (0, 1), engine=nisa.engine.vector)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=other, op=nl.add)
        nisa.dma_copy(dst=out[c], src=acc)
        return out

    return swap_rounds


def _swap_expected(x):
    a, b = x[0].astype(np.float64), x[1].astype(np.float64)
    for _ in range(3):
        a, b = a + b, b + a
    return np.stack([a, b])


@pytest.mark.parametrize("backend", BACKENDS)
def test_rounds_of_exchanges_through_shared_hbm_ordered_by_barriers(backend):
    x = np.random.default_rng(8).standard_normal((2, 128, 32)).astype(np.float32)
    np.testing.assert_allclose(_run(_iterated_swap(True), backend, x), _swap_expected(x), rtol=1e-6, atol=1e-6)


def test_without_the_write_after_read_barrier_the_cores_race_and_the_kernel_is_refused():
    # a core would publish round k + 1 while its peer still reads round k (rule core-race names both lines)
    x = np.zeros((2, 128, 32), np.float32)
    with pytest.raises(NkiVerificationError) as info:
        _iterated_swap(False)[2](x)
    (diag,) = info.value.diagnostics
    assert diag.rule == "core-race" and diag.op == "nisa.dma_copy"
    # the write that publishes the next round, and the peer's read of this round (the line after the barrier)
    assert re.match(r"core \d writes %\w+\[128, 32\] in 'shared_hbm' and core \d reads %\w+\[128, 32\] in "
                    r"'shared_hbm' at line (\d+) \(nisa.dma_copy\) in the same phase", diag.message)
    read_line = int(re.search(r"at line (\d+)", diag.message).group(1))
    assert read_line == diag.loc.line + 3


# -- the simulator: a core waits for its peer --------------------------------------------------------------------
def _late_core_one(sync: str):
    @nki.jit
    def late(x):
        """Core 1 computes 16 exponentials (masked off on core 0) before the sync op; core 0 has nothing to do."""
        _, P, F = x.shape
        c = nl.program_id(0)
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c])
        for _ in nl.sequential_range(16):
            t[...] = legacy_isa.activation(nl.exp, t, mask=(c >= 1))
        got = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        if sync == "sendrecv":
            nisa.sendrecv(src=t, dst=got, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
        else:  # publish, wait (the barrier orders the accesses to scratch), read the peer's
            scratch = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=scratch[c], src=t)
            nisa.core_barrier(scratch, (0, 1))
            nisa.dma_copy(dst=got, src=scratch[1 - c])
        nisa.dma_copy(dst=out[c], src=got)
        return out

    return late


def _sync_spans(profile, opcode):
    s = profile.schedule
    return [(s.start[i], s.end[i]) for i in range(len(s)) if s.templates[s.template[i]].opcode == opcode]


def _activations_end(profile):
    s = profile.schedule
    ends = [s.end[i] for i in range(len(s)) if s.templates[s.template[i]].opcode == "nisa.activation"]
    return max(ends, default=0.0)


def test_the_simulated_sendrecv_starts_when_the_later_core_arrives():
    x = np.zeros((2, 128, 512), np.float32)
    trn2 = nki_dsl.get_target("trn2")
    core0, core1 = nki_dsl.backends.load("simulator").profile_cores(nki_dsl.trace(_late_core_one("sendrecv")[2], x).ir,
                                                                    trn2)  # fmt: skip
    busy = _activations_end(core1)
    assert _activations_end(core0) == 0.0 and busy > 10_000  # core 1's exponentials, ~16 x 0.5 us
    ((s0, e0),), ((s1, e1),) = _sync_spans(core0, "nisa.sendrecv"), _sync_spans(core1, "nisa.sendrecv")
    assert s0 == s1 >= busy  # core 0 waited for core 1
    transfer = 128 * 512 * 4 / 128 / trn2.dma_engine_bytes_per_ns  # its bytes per partition at one engine's rate
    assert e0 == e1 >= s0 + trn2.dma_fixed_ns + transfer * 0.9  # then one SBUF-to-SBUF DMA (§3.4)
    assert abs(core0.latency_ns - core1.latency_ns) < 1e-6


def test_the_simulated_barrier_holds_its_engine_until_the_peers_signal():
    x = np.zeros((2, 128, 512), np.float32)
    trn2 = nki_dsl.get_target("trn2")
    core0, core1 = nki_dsl.backends.load("simulator").profile_cores(nki_dsl.trace(_late_core_one("barrier")[2], x).ir,
                                                                    trn2)  # fmt: skip
    ((s0, e0),), ((s1, e1),) = _sync_spans(core0, "nisa.core_barrier"), _sync_spans(core1, "nisa.core_barrier")
    assert s0 < _activations_end(core1) < s1  # core 0 reached it long before core 1, which stored its tile first
    assert e0 == e1 == pytest.approx(s1 + trn2.dma_fixed_ns)  # released by core 1's signal (§3.4 semaphore cost)
    dmas = _sync_spans(core0, "nisa.dma_copy")
    assert dmas[2][0] >= e0  # core 0's read of the peer's tile waited for the barrier
    assert core0.latency_ns > _activations_end(core1)  # alone, core 0 would have finished long before core 1


def test_a_kernel_whose_cores_would_deadlock_is_refused_on_every_backend():
    kernel = lnc_kernels.exchange(lambda c: c, lambda c: c)  # each core "exchanges" with itself
    x = np.zeros((2, 128, 64), np.float32)
    for backend in BACKENDS:
        with pytest.raises(NkiVerificationError, match=r"lnc_kernels.py:\d+: nisa.sendrecv: on core 0"):
            _run(kernel, backend, x)


def test_every_simulator_entry_runs_the_cores_together():
    x = np.random.default_rng(9).standard_normal((2, 384, 96)).astype(np.float32)
    sim = nki.simulate(ring_all_reduce)[2]
    out_a = sim(x)
    out_b, profile_b = nki.simulate(ring_all_reduce[2], x)  # the project's (outputs, Profile) form
    out_c = ring_all_reduce[2](x, backend="simulator")
    np.testing.assert_array_equal(out_a, out_b)
    np.testing.assert_array_equal(out_a, out_c)
    assert sim.profile.latency_ns == profile_b.latency_ns == max(p.latency_ns for p in sim.core_profiles)
    assert len(sim.core_profiles) == 2


@nki.jit
def nested_rounds(x):
    """Two nested loops, each level meeting: per outer round a barrier, per inner step an exchange of the running
    sum: core c ends with x[c] + 6 x[1 - c]."""
    _, P, F = x.shape
    c = nl.program_id(0)
    out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x[c])
    mine = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[c])
    for _ in nl.sequential_range(2):
        nisa.core_barrier(out, (0, 1))
        for _ in nl.sequential_range(3):
            got = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
            nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=got, op=nl.add)
    nisa.dma_copy(dst=out[c], src=acc)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_loops_that_meet_at_both_levels(backend):
    x = np.random.default_rng(12).standard_normal((2, 128, 16)).astype(np.float32)
    out = _run(nested_rounds, backend, x)
    a, b = x.astype(np.float64)
    np.testing.assert_allclose(out, np.stack([a + 6 * b, b + 6 * a]), rtol=1e-6, atol=1e-6)


def test_on_jax_a_loop_that_meets_is_one_loop_not_unrolled():
    # both cores run it as one lax.fori_loop (backends/jax/collectives.py): the program does not grow with its trips
    import jax

    from nki_dsl.backends.jax.program import build

    sizes = []
    for tiles in (2, 16):
        x = np.zeros((2, 128 * tiles, 64), np.float32)
        ir = nki_dsl.trace(ring_all_reduce[2], x).ir
        _, fn = build(ir)
        sizes.append(len(jax.make_jaxpr(fn)(x).jaxpr.eqns))
    assert sizes[0] == sizes[1]


# -- register loops beside the meetings (nl.dynamic_range: each core's trip count its own) ------------------------
@nki.jit
def dynamic_then_exchange(x, n):
    """x [2, 128, 512], n [2, 1] int32: core c sums the first n[c] 128-column tiles of x[c] in a register loop (the
    cores' trip counts differ), then the cores exchange sums: out[c] = both cores' sums added."""
    _, P, F = x.shape
    c = nl.program_id(0)
    acc = nl.ndarray((P, 128), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    count = nisa.register_alloc()
    nisa.register_load(count, n[nl.ds(c, 1), :])
    for i in nl.dynamic_range(count):
        t = nl.ndarray((P, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c, :, nl.ds(i * 128, 128)])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
    got = nl.ndarray((P, 128), nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=acc, dst=got, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=got, op=nl.add)
    out = nl.ndarray((2, P, 128), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[c], src=acc)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_register_loops_of_different_lengths_then_an_exchange(backend):
    x = np.random.default_rng(13).standard_normal((2, 128, 512)).astype(np.float32)
    n = np.array([[3], [1]], np.int32)
    out = _run(dynamic_then_exchange, backend, x, n)
    total = sum(x[c, :, :128 * int(n[c, 0])].astype(np.float64).reshape(128, -1, 128).sum(axis=1) for c in (0, 1))
    np.testing.assert_allclose(out, np.stack([total, total]), rtol=1e-5, atol=1e-5)


def test_a_sync_op_inside_a_register_loop_is_refused():
    # its trip count may differ between the cores: one would wait at a meeting the other never reaches
    @nki.jit
    def exchange_per_iteration(x, n):
        _, P, F = x.shape
        c = nl.program_id(0)
        count = nisa.register_alloc()
        nisa.register_load(count, n[nl.ds(c, 1), :])
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c])
        for _ in nl.dynamic_range(count, max_trip=4):
            nisa.sendrecv(src=t, dst=t, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
        nisa.dma_copy(dst=out[c], src=t)
        return out

    with pytest.raises(NkiVerificationError, match="trip count may differ between the cores"):
        exchange_per_iteration[2](np.zeros((2, 128, 8), np.float32), np.array([[1], [2]], np.int32))
