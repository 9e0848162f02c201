"""PSUM bank accounting by live physical buffers (``verify/psum_buffers.py``): a PSUM tensor with leading block
dimensions whose blocks are each written and consumed within one loop iteration takes one block's banks (the
attention-performance tutorial's v8a ``s_psum[i_q, i_kv]`` pattern); a kernel that really keeps more than the 8
banks live is still refused (8 accepted, 9 refused)."""

from __future__ import annotations

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.verify.program import Program
from nki_dsl.verify.psum_buffers import peak_banks, psum_buffers, tensor_banks


@nki.jit
def v8a_scores(q_t, k_t):
    """``s = q.T @ k`` block by block through ``s_psum[i_q, i_kv]``: each block written by nc_matmul and copied
    out to SBUF in the same iteration, as the tutorial's v8a keeps its scores."""
    d, sq = q_t.shape
    skv = k_t.shape[1]
    nq, nkv = sq // 128, skv // 512
    out = nl.ndarray((sq, skv), dtype=nl.float32, buffer=nl.shared_hbm)
    s_psum = nl.ndarray((nq, nkv, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    q_sb = nl.load(q_t)
    k_sb = nl.load(k_t)
    for i_q in nl.affine_range(nq):
        for i_kv in nl.affine_range(nkv):
            s_psum[i_q, i_kv] = nisa.nc_matmul(q_sb[:, nl.ds(i_q * 128, 128)], k_sb[:, nl.ds(i_kv * 512, 512)])
            s_sb = nisa.tensor_copy(s_psum[i_q, i_kv])
            nl.store(out[nl.ds(i_q * 128, 128), nl.ds(i_kv * 512, 512)], value=s_sb)
    return out


@pytest.mark.parametrize("seqlen", [512, 1024, 2048])
def test_blocks_written_and_consumed_in_one_iteration_share_a_bank(seqlen, traced):
    q, k = np.zeros((64, seqlen), np.float32), np.zeros((64, seqlen), np.float32)
    ir = traced(v8a_scores, q, k)  # before: refused with seqlen**2 / 65536 banks
    used = peak_banks(psum_buffers(Program(ir), nki.get_target("trn2")))
    assert used.total == 1


@nki.jit
def attention_v8a_style(q_t, k_t, v):
    """Softmax attention for one head (``q_t``, ``k_t`` [d, S], ``v`` [S, d]) in the style of the attention tutorial's
    v8a: scores through ``s_psum[i_q, i_kv]`` and the probabilities' transposes through ``t_psum[i_q, i_t]``, both
    PSUM tensors with a block per iteration, declared before the loops."""
    d, seqlen = q_t.shape
    nq, nkv, nt = seqlen // 128, seqlen // 512, seqlen // 128
    out = nl.ndarray((seqlen, d), dtype=nl.float32, buffer=nl.shared_hbm)
    s_psum = nl.ndarray((nq, nkv, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    t_psum = nl.ndarray((nq, nt, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
    q_sb = nl.load(q_t)
    k_sb = nl.load(k_t)
    v_sb = nl.ndarray((nt, nl.par_dim(128), d), dtype=nl.float32, buffer=nl.sbuf)
    for i_t in nl.affine_range(nt):
        v_sb[i_t] = nl.load(v[nl.ds(i_t * 128, 128), :])
    for i_q in nl.affine_range(nq):
        scores = nl.ndarray((128, seqlen), dtype=nl.float32, buffer=nl.sbuf)
        for i_kv in nl.affine_range(nkv):
            s_psum[i_q, i_kv] = nisa.nc_matmul(q_sb[:, nl.ds(i_q * 128, 128)], k_sb[:, nl.ds(i_kv * 512, 512)])
            scores[:, nl.ds(i_kv * 512, 512)] = nisa.tensor_copy(s_psum[i_q, i_kv])
        neg_max = nl.multiply(nl.max(scores, axis=1, keepdims=True), -1.0)
        probs = nisa.activation(np.exp, scores, bias=neg_max)
        total = nl.sum(probs, axis=1, keepdims=True)
        probs_t = nl.ndarray((nt, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
        for i_t in nl.affine_range(nt):
            t_psum[i_q, i_t] = nisa.nc_transpose(probs[:, nl.ds(i_t * 128, 128)])
            probs_t[i_t] = nisa.tensor_copy(t_psum[i_q, i_t])
        o_psum = nl.zeros((128, d), dtype=nl.float32, buffer=nl.psum)
        for i_t in nl.affine_range(nt):
            o_psum += nisa.nc_matmul(probs_t[i_t], v_sb[i_t])
        o = nl.divide(nisa.tensor_copy(o_psum), total)
        nl.store(out[nl.ds(i_q * 128, 128), :], value=o)
    return out


@pytest.mark.parametrize("seqlen", [512, 1024])
def test_a_v8a_style_attention_fits_although_its_blocks_do_not(seqlen, traced):
    q, v = np.zeros((64, seqlen), np.float32), np.zeros((seqlen, 64), np.float32)
    ir = traced(attention_v8a_style, q, q, v)
    buffers = psum_buffers(Program(ir), nki.get_target("trn2"))
    every_block = sum(tensor_banks(b.live.tensor.type, 2048) for b in buffers)
    assert every_block == 1 + (seqlen // 128) * (seqlen // 512 + seqlen // 128)  # what was counted before
    assert every_block > 8 and peak_banks(buffers).total <= 3


def _held_then_blocks(held: int, shared: bool):
    """``held`` PSUM accumulators live across a loop whose body uses one block of a 4-block PSUM tensor; with
    ``shared`` the block is picked by the loop index (block-local), else every block is filled first and read in a
    second loop (all four live together)."""

    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = [nl.zeros((128, 512), nl.float32, buffer=nl.psum, name=f"held{k}") for k in range(held)]
        blocks = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(a)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        if shared:
            for i in nl.affine_range(4):
                blocks[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
                total[...] += nisa.tensor_copy(blocks[i])
        else:
            for i in nl.affine_range(4):
                blocks[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
            for i in nl.affine_range(4):
                total[...] += nisa.tensor_copy(blocks[i])
        for t in acc:
            total[...] += nl.copy(t)
        nl.store(out, value=total)
        return out

    return kernel


A = np.zeros((128, 512), np.float32)


def test_seven_held_banks_and_one_shared_block_make_eight(traced):
    traced(_held_then_blocks(7, shared=True), A)


def test_eight_held_banks_and_one_shared_block_make_nine(rejected):
    (diag,) = rejected(_held_then_blocks(8, shared=True), A).diagnostics
    assert diag.rule == "psum-banks" and diag.message.startswith("9 PSUM banks are in use here")


def test_golden_two_filled_block_tensors_and_one_shared_block(golden, rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        first = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        second = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        scratch = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            first[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
            second[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
        for i in nl.affine_range(4):
            scratch[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)  # block-local: one bank
            total[...] += nisa.tensor_copy(scratch[i])
            total[...] += nisa.tensor_copy(first[i])
            total[...] += nisa.tensor_copy(second[i])
        nl.store(out, value=total)
        return out

    golden("psum-banks", rejected(kernel, A), "shared-blocks")


def test_four_blocks_live_together_count_four_banks(traced, rejected):
    traced(_held_then_blocks(4, shared=False), A)  # 4 + 4 = 8
    (diag,) = rejected(_held_then_blocks(5, shared=False), A).diagnostics
    assert diag.rule == "psum-banks" and diag.message.startswith("9 PSUM banks are in use here")
    assert "f32[4, 128, 512] in 'psum' (4 banks, line" in diag.message


def test_blocks_two_iterations_may_share_are_counted_apart(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((9, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(a)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(3):
            for j in nl.sequential_range(3):
                blocks[i + j] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)  # (0, 1) and (1, 0) share block 1
                total[...] += nisa.tensor_copy(blocks[i + j])
        nl.store(out, value=total)
        return out

    (diag,) = rejected(kernel, A).diagnostics
    assert diag.message.startswith("9 PSUM banks are in use here")


def test_blocks_read_outside_their_iteration_are_counted_apart(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((9, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(a)
        for i in nl.affine_range(9):
            blocks[i] = nisa.nc_matmul(x[:, nl.ds(0, 128)], x)
        nl.store(out, value=nisa.tensor_copy(blocks[8]))  # block 8 outlives the loop: all nine may be live
        return out

    (diag,) = rejected(kernel, A).diagnostics
    assert diag.message.startswith("9 PSUM banks are in use here")


@nki.jit
def eight_products(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    ps = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
    for p in ps:
        p[...] = nisa.nc_matmul(x[:, 0:128], x)
    total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for p in ps:
        total[...] += nisa.tensor_copy(p)
    nl.store(out, value=total)
    return out


def test_kernel_placed_tensors_on_the_same_bank_count_once(traced):
    ir = traced(eight_products, A)
    target = nki.get_target("trn2")
    assert peak_banks(psum_buffers(Program(ir), target)).total == 8
    allocs = [s for s in ir.body if getattr(s, "name", None) == "alloc" and s.result.type.buffer.value == "psum"]
    assert len(allocs) == 8
    for bank, op in enumerate(allocs):
        op.attrs["address"] = (0, 2048 * bank)  # placed on banks 0..7: still eight
    assert peak_banks(psum_buffers(Program(ir), target)).total == 8
    allocs[1].attrs["address"] = (0, 0)  # two on bank 0 by design: seven distinct banks
    used = peak_banks(psum_buffers(Program(ir), target))
    assert used.total == 7
    assert sorted(b.fixed for b in used.live if b.live.tensor is allocs[1].result) == [frozenset({0})]


def _block_read_in_an_inner_loop(held: int):
    """One block per iteration of ``i``, read half by half in an inner loop that also makes a PSUM tile after the
    read: the block must outlive the inner loop's every iteration, so it is live beside that tile."""

    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = [nl.zeros((128, 512), nl.float32, buffer=nl.psum, name=f"held{k}") for k in range(held)]
        blocks = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(a)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            blocks[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
            for j in nl.affine_range(2):
                total[:, nl.ds(j * 256, 256)] += nisa.tensor_copy(blocks[i, :, nl.ds(j * 256, 256)])
                other = nisa.nc_matmul(x[:, nl.ds(j * 128, 128)], x[:, nl.ds(j * 256, 256)])
                total[:, nl.ds(j * 256, 256)] += nisa.tensor_copy(other)
        for t in acc:
            total[...] += nl.copy(t)
        nl.store(out, value=total)
        return out

    return kernel


def test_a_block_read_in_an_inner_loop_is_live_through_that_loop(traced, rejected):
    traced(_block_read_in_an_inner_loop(6), A)  # 6 held + the block + the inner tile
    (diag,) = rejected(_block_read_in_an_inner_loop(7), A).diagnostics
    assert diag.rule == "psum-banks" and diag.message.startswith("9 PSUM banks are in use here")


@nki.jit
def per_program_blocks(a):
    """Each of the grid's programs accumulates x[:, 128i:128i+128].T @ x[:, :512] over i through its own row of
    blocks ``blocks[pid, i]``, each written and consumed in one iteration: 16 blocks, one bank's worth live."""
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = nl.ndarray((2, 8, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    pid = nl.program_id(0)
    x = nl.load(a)
    total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(8):
        blocks[pid, i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x[:, 0:512])
        total[...] += nisa.tensor_copy(blocks[pid, i])
    nl.store(out[nl.ds(pid * 128, 128), :], value=total)
    return out


def test_blocks_picked_by_the_program_id_and_a_loop_share_a_bank(traced):
    # the program id stays one value in each program (both iterations compared see the same one), so the blocks
    # are distinct per iteration and one bank holds them, not 16
    a = (np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024) % 13) / 13
    ir = traced(per_program_blocks[2], a)
    assert peak_banks(psum_buffers(Program(ir), nki.get_target("trn2"))).total == 1
    want = sum(a[:, 128 * i:128 * (i + 1)].T @ a[:, :512] for i in range(8))
    np.testing.assert_allclose(per_program_blocks[2](a), np.concatenate([want, want]), rtol=1e-5)


def test_a_refusal_names_the_banks_a_kernel_placed_its_tensor_on(rejected):
    import nki_dsl.compiler as ncc

    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        placed = nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32,
                            buffer=ncc.psum.mod_alloc(base_bank=5, num_free_tiles=(2,)))
        ps = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(7)]
        for i in nl.affine_range(2):
            placed[i] = nisa.nc_matmul(x[:, 0:128], x)
        for p in ps:
            p[...] = nisa.nc_matmul(x[:, 0:128], x)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for p in ps:
            total[...] += nisa.tensor_copy(p)
        for i in nl.affine_range(2):
            total[...] += nisa.tensor_copy(placed[i])
        nl.store(out, value=total)
        return out

    (diag,) = rejected(kernel, A).diagnostics
    assert diag.message.startswith("9 PSUM banks are in use here"), diag.message
    assert "f32[2, 128, 512] in 'psum' (2 banks placed at 5, 6, line" in diag.message, diag.message


def _block_0_read_in_every_iteration(held: int):
    """``held`` accumulators live across a loop writing block i of a 4-block PSUM tensor and reading block i and
    block 0: block 0, written in the first iteration, is read in all four, so the blocks are not one iteration's."""

    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = [nl.zeros((128, 512), nl.float32, buffer=nl.psum, name=f"held{k}") for k in range(held)]
        blocks = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        x = nl.load(a)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(4):
            blocks[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
            total[...] += nisa.tensor_copy(blocks[i])
            total[...] += nisa.tensor_copy(blocks[0])
        for t in acc:
            total[...] += nl.copy(t)
        nl.store(out, value=total)
        return out

    return kernel


def test_a_block_also_read_through_another_block_expression_keeps_every_block_live(traced, rejected):
    traced(_block_0_read_in_every_iteration(4), A)  # 4 held + 4 blocks = 8
    (diag,) = rejected(_block_0_read_in_every_iteration(5), A).diagnostics
    assert diag.rule == "psum-banks" and diag.message.startswith("9 PSUM banks are in use here")
    assert "f32[4, 128, 512] in 'psum' (4 banks, line" in diag.message


def _eight_then_a_block(a):
    """In each iteration: eight one-bank products live together and copied out, then one block of a block-local
    tensor written and copied."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
    x = nl.load(a)
    total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        early = [nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x) for _ in range(8)]
        for e in early:
            total[...] += nisa.tensor_copy(e)
        blocks[i] = nisa.nc_matmul(x[:, nl.ds(i * 128, 128)], x)
        total[...] += nisa.tensor_copy(blocks[i])
    nl.store(out, value=total)
    return out


def test_a_block_is_live_from_its_first_use_in_the_iteration_not_from_the_iterations_start(traced):
    """Eight banks before the block and one after: at most eight at once (the block's bank counted over the whole
    iteration would make nine)."""
    ir = traced(nki.jit(_eight_then_a_block), A)
    assert peak_banks(psum_buffers(Program(ir), nki.get_target("trn2"))).total == 8
