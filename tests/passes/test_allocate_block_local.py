"""The allocator agrees with the verifier on block-local PSUM tensors (``verify/psum_buffers.py``): their blocks
share one block's banks, rotating with the loop that picks the block, and the simulator orders each block's
writes after the reads of the block that used the same bank before (so shared banks never corrupt each other)."""

from __future__ import annotations

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.backends.simulator.prepared import prepare
from tests.verify.test_psum_live_blocks import attention_v8a_style, v8a_scores

TRN2 = nki.get_target("trn2")


def _inputs(seqlen: int):
    rng = np.random.default_rng(seqlen)
    return rng.standard_normal((64, seqlen)).astype(np.float32), rng.standard_normal((64, seqlen)).astype(np.float32)


@pytest.mark.parametrize("seqlen", [1024, 2048])
def test_block_local_scores_take_one_bank_per_copy_and_stay_exact(seqlen):
    q, k = _inputs(seqlen)
    ir = nki.trace(v8a_scores, q, k).ir
    prepared = prepare(ir, TRN2)
    (p,) = [p for p in prepared.allocation.placements.values() if p.shared_blocks]
    assert p.buffer == "psum" and p.bytes_per_partition == TRN2.psum_bank_bytes
    assert 1 <= p.buffers <= 3 and p.byte_offset + p.footprint <= TRN2.psum_banks * TRN2.psum_bank_bytes
    want = q.astype(np.float64).T @ k.astype(np.float64)
    out, _ = nki.simulate(v8a_scores, q, k, target="trn2")
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v8a_scores(q, k), want, rtol=1e-4, atol=1e-4)


def test_a_shared_bank_is_written_only_after_its_previous_block_was_read():
    q, k = _inputs(1024)
    ir = nki.trace(v8a_scores, q, k).ir
    (p,) = [p for p in prepare(ir, TRN2).allocation.placements.values() if p.shared_blocks]
    _, prof = nki.simulate(v8a_scores, q, k, target="trn2")
    s = prof.schedule
    ops = [s.templates[t].opcode for t in s.template]
    matmul = [k for k, op in enumerate(ops) if op == "nisa.nc_matmul"]
    copy = [k for k, op in enumerate(ops) if op == "nisa.tensor_copy"]
    assert len(matmul) == len(copy) == 16  # 8 query tiles x 2 key blocks, one block each
    for it in range(p.buffers, 16):
        # iteration it writes the copy iteration it - buffers read: not before that read ended
        assert s.start[matmul[it]] >= s.end[copy[it - p.buffers]]


@pytest.mark.parametrize("seqlen", [512, 1024])
def test_v8a_style_attention_runs_on_shared_banks_and_matches_float64(seqlen):
    rng = np.random.default_rng(seqlen)
    q, k = (rng.standard_normal((64, seqlen)).astype(np.float32) * 0.3 for _ in range(2))
    v = rng.standard_normal((seqlen, 64)).astype(np.float32)
    scores = q.astype(np.float64).T @ k.astype(np.float64)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    want = p / p.sum(axis=1, keepdims=True) @ v.astype(np.float64)
    out, _ = nki.simulate(attention_v8a_style, q, k, v, target="trn2")
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(attention_v8a_style(q, k, v), want, rtol=1e-5, atol=1e-5)
    ir = nki.trace(attention_v8a_style, q, k, v).ir
    shared = [p for p in prepare(ir, TRN2).allocation.placements.values() if p.shared_blocks]
    assert len(shared) == 2 and all(p.bytes_per_partition == TRN2.psum_bank_bytes for p in shared)


def test_the_fast_profile_of_shared_banks_equals_the_instruction_by_instruction_one():
    from nki_dsl.backends.simulator import profile

    q, k = _inputs(4096)
    ir = nki.trace(v8a_scores, q, k).ir
    exact, fast = profile(ir, TRN2, steady=False), profile(ir, TRN2)
    assert exact.schedule.advanced == 0
    assert abs(fast.latency_ns - exact.latency_ns) <= 1e-6 * exact.latency_ns
    assert fast.instructions == exact.instructions


def test_a_block_tensor_the_kernel_placed_keeps_every_block():
    import copy

    from nki_dsl.passes import run_pipeline
    from nki_dsl.passes.allocate import allocate

    q, k = _inputs(512)
    ir = copy.deepcopy(nki.trace(v8a_scores, q, k).ir)
    (alloc,) = [s for s in ir.body if getattr(s, "name", None) == "alloc" and s.result.type.buffer.value == "psum"]
    alloc.attrs["address"] = (0, 2048)  # its 4 blocks on banks 1..4, as the kernel chose
    low = run_pipeline(ir, TRN2)
    p = allocate(low, TRN2).placements[alloc.result.name]
    assert not p.shared_blocks and (p.byte_offset, p.bytes_per_partition) == (2048, 4 * 2048)


def test_kernels_the_verifier_accepts_at_exactly_eight_banks_are_placed():
    from tests.verify.test_psum_live_blocks import _held_then_blocks, eight_products

    x = np.random.default_rng(7).standard_normal((128, 512)).astype(np.float32)
    x64 = x.astype(np.float64)
    blocks = sum(x64[:, i * 128:(i + 1) * 128].T @ x64 for i in range(4))
    cases = [(_held_then_blocks(7, shared=True), blocks), (_held_then_blocks(4, shared=False), blocks),
             (eight_products, 8 * (x64[:, :128].T @ x64))]  # fmt: skip
    for kernel, want in cases:
        out, _ = nki.simulate(kernel, x, target="trn2")  # lowered, allocated in 8 banks, simulated
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
