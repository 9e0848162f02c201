"""Rule ``direct-allocation``: placements from ``ncc.sbuf`` / ``ncc.psum`` (reference/nki.md §2.7 "Direct
allocation") are inside the target's memory, aligned, and never share space while in use; each refusal has an
accepted counterpart that differs only in the placement."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.compiler as ncc
import nki_dsl.language as nl
from nki_dsl.passes.pipeline import compile_for_target

X = (np.arange(512 * 64, dtype=np.float32).reshape(512, 64) % 97) / 97


def _double_buffered(sbuf_alloc, psum_alloc=None, blocks=4, read_lag=0):
    """Each 128-row block of x goes through a 4-block SBUF tensor ``buf`` (placed by ``sbuf_alloc``) and a PSUM
    accumulator; the store reads block ``i - read_lag``."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((blocks, nl.par_dim(128), 64), nl.float32, buffer=sbuf_alloc)
        for i in nl.affine_range(4):
            acc = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=psum_alloc or nl.psum)
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
            acc[...] = nl.exp(buf[i])
            nl.store(out[nl.ds(i * 128, 128), :], value=nl.copy(acc))
        return out

    return kernel


def test_mod_alloc_double_buffer_is_honoured_and_computes_the_same():
    k = _double_buffered(ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)), ncc.psum.mod_alloc(base_bank=3))
    np.testing.assert_allclose(k(X), np.exp(X), rtol=1e-6)
    out, _ = nki.simulate(k, X, target="trn2")
    np.testing.assert_allclose(out, np.exp(X), rtol=1e-6)
    _, alloc = compile_for_target(nki.trace(k, X, target="trn2").ir, nki.get_target("trn2"))
    buf = next(p for p in alloc.placements.values() if p.blocks)
    assert buf.blocks == ((0, 1024), (0, 1280), (0, 1024), (0, 1280))  # block i at 1024 + (i % 2) * 256 bytes
    acc = next(p for p in alloc.placements.values() if p.buffer == "psum" and p.byte_offset == 3 * 2048)
    assert acc.partitions == 128


def test_alloc_with_a_function_places_each_block():
    k = _double_buffered(ncc.sbuf.alloc(lambda idx, pdim, fbytes: (0, 4096 + idx[0] * fbytes)))
    np.testing.assert_allclose(nki.simulate(k, X, target="trn2")[0], np.exp(X), rtol=1e-6)
    ir = nki.trace(k, X).ir
    placed = next(s for s in ir.body if s.name == "alloc" and s.attrs)
    assert placed.attrs["address"] == (0, 4096, 0, 4352, 0, 4608, 0, 4864)


def test_blocks_sharing_space_count_once_for_sbuf_capacity():
    # 64 blocks of 8 KiB (512 KiB logically) in two slots: 16 KiB of SBUF, which fits
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 2048), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((64, nl.par_dim(128), 2048), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.sequential_range(64):
            buf[i] = nl.load(x)
            nl.store(out, value=buf[i])
        return out

    nki.trace(kernel, np.zeros((128, 2048), np.float32), target="trn2")


def test_golden(golden, rejected):
    # read_lag: the store reads the block before, which shares the slot of the one just loaded (one slot)
    @nki.jit
    def lagging(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        for i in nl.sequential_range(3):
            buf[i + 1] = nl.load(x[nl.ds(i * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], value=buf[i])
        return out

    golden("direct-allocation", rejected(lagging, X))


def test_two_slots_hold_a_block_and_the_one_before():
    @nki.jit
    def lagging(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        buf[0] = nl.load(x[0:128, :])
        for i in nl.sequential_range(3):
            buf[i + 1] = nl.load(x[nl.ds((i + 1) * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], value=buf[i])
        return out

    got = lagging(X)
    np.testing.assert_array_equal(got[:384], X[:384])


def _two_tensors(b_addr):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        b = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=b_addr))
        a[...] = nl.load(x[0:128, :])
        b[...] = nl.exp(a)
        nl.store(out, value=nl.add(a, b))
        return out

    return kernel


def test_overlapping_live_tensors_are_refused(golden, rejected):
    golden("direct-allocation", rejected(_two_tensors(128), X), "overlap")
    np.testing.assert_allclose(_two_tensors(256)(X), X[:128] + np.exp(X[:128]), rtol=1e-6)


@pytest.mark.parametrize("alloc, message", [
    (lambda: ncc.sbuf.mod_alloc(base_addr=224 * 1024), "exceed the 229376 of a trn2 partition"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=2), "byte offset 2 is not a multiple of"),
    (lambda: ncc.sbuf.alloc(lambda idx, p, f: (32, 0)), "partitions 32..159 exceed the 128 partitions"),
    (lambda: ncc.sbuf.alloc(lambda idx, p, f: (0, idx[0] * 128)), "overlap partly"),
])  # fmt: skip
def test_bad_sbuf_placements_are_refused(rejected, alloc, message):
    err = rejected(_double_buffered(alloc()), X)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    assert message in str(err), str(err)


@pytest.mark.parametrize("alloc, message", [
    (lambda: ncc.psum.mod_alloc(base_bank=8), "exceed the 16384 of a trn2 partition (8 PSUM banks)"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, base_addr=1900), "cross a PSUM bank boundary"),
])  # fmt: skip
def test_bad_psum_placements_are_refused(rejected, alloc, message):
    err = rejected(_double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)), alloc()), X)
    assert message in str(err), str(err)


def test_two_psum_tiles_in_one_bank_are_accepted():
    # [128, 64] f32 is 256 B: base_addr 1792 ends at the bank's last byte
    k = _double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)),
                         ncc.psum.mod_alloc(base_bank=7, base_addr=1792))
    np.testing.assert_allclose(k(X), np.exp(X), rtol=1e-6)


@nki.jit
def two_loops(x):
    """Blocks of a 4-block tensor in 2 slots written by one loop and read by another."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for i in nl.affine_range(4):
        buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
    for j in nl.affine_range(4):
        nl.store(out[nl.ds(j * 128, 128), :], value=buf[j])
    return out


def test_indexing_blocks_with_different_loops_through_shared_space_is_refused(rejected):
    err = rejected(two_loops, X)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    line = _line_of(two_loops, "buf[i] = ")
    assert (f"blocks [0] and [2] share space (partitions 0..127, bytes 0..255), but block [2] is written at line "
            f"{line} while block [0], written at line {line}, is still to be read at line {line + 2}") in str(err)


def _line_of(kernel, text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(kernel.fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


# -- a software pipeline: constant block indices before and after the loop are compared with the loop's ---------


def _pipeline(slots: int, distance: int, n: int = 8):
    """``n`` blocks of 128 rows through a ring of ``slots`` SBUF slots with prefetch ``distance``: the prologue
    loads blocks 0..distance-1, iteration i stores block i and then loads block i + distance (into the slot block
    i just freed when ``slots == distance``), the epilogue stores the last ``distance`` blocks. Correct exactly
    when ``slots >= distance``."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((n * 128, 64), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((n, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(slots,)))
        for b in nl.static_range(distance):  # unrolled: constant block indices
            buf[b] = nl.load(x[b * 128:(b + 1) * 128, :])
        for i in nl.sequential_range(n - distance):
            nl.store(out[nl.ds(i * 128, 128), :], value=buf[i])
            buf[i + distance] = nl.load(x[nl.ds((i + distance) * 128, 128), :])
        for b in nl.static_range(n - distance, n):
            nl.store(out[b * 128:(b + 1) * 128, :], value=buf[b])
        return out

    return kernel


X8 = (np.arange(1024 * 64, dtype=np.float32).reshape(1024, 64) % 89) / 89


def test_a_prologue_overwriting_a_block_before_the_loop_reads_it_is_refused(golden, rejected):
    # distance 3 through 2 slots: the prologue's block 2 takes block 0's slot before iteration 0 stores block 0.
    # The per-iteration check set the prologue's constant indices aside and accepted this (the loop's own window
    # {i, i + 3} is in distinct slots), storing block 2's rows as block 0's.
    golden("direct-allocation", rejected(_pipeline(slots=2, distance=3), X8), "prologue")


def test_a_pipeline_whose_prefetch_reuses_the_slot_just_read_is_accepted():
    # distance 2 through 2 slots: iteration i reads block i, then loads block i + 2 into its slot. The
    # per-iteration check refused this ("one iteration's accesses touch both"): one op order apart is enough.
    k = _pipeline(slots=2, distance=2)
    np.testing.assert_array_equal(k(X8), X8)
    np.testing.assert_array_equal(nki.simulate(k, X8, target="trn2")[0], X8)


@pytest.mark.parametrize("slots, distance", [(1, 2), (2, 3), (3, 4)])
def test_fewer_slots_than_the_prefetch_distance_are_refused(rejected, slots, distance):
    err = rejected(_pipeline(slots=slots, distance=distance), X8)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    assert "share space" in str(err) and "is still to be read at line" in str(err), str(err)


@pytest.mark.parametrize("slots, distance", [(1, 1), (3, 3), (4, 3)])
def test_as_many_slots_as_the_prefetch_distance_are_accepted(slots, distance):
    np.testing.assert_array_equal(_pipeline(slots=slots, distance=distance)(X8), X8)


def test_an_epilogue_reading_a_block_the_loop_overwrote_is_refused(rejected):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.sequential_range(4):
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
        nl.store(out, value=buf[1])  # block 3 took block 1's slot at the loop's last iteration
        return out

    err = rejected(kernel, X)
    assert "blocks [1] and [3] share space" in str(err), str(err)
    kernel_ok = _pipeline(slots=2, distance=2)  # its epilogue reads blocks 6 and 7, in distinct slots
    np.testing.assert_array_equal(kernel_ok(X8), X8)


def test_block_local_use_in_two_loops_through_one_slot_is_accepted():
    # each loop writes and reads block i within one iteration: one slot serves both loops (the per-iteration
    # check refused this: the loops index the blocks with different loop variables)
    @nki.jit
    def two_loops(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        for i in nl.affine_range(4):
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], value=nl.exp(buf[i]))
        for j in nl.affine_range(4):
            buf[j] = nl.load(out[nl.ds(j * 128, 128), :])
            nl.store(out[nl.ds(j * 128, 128), :], value=nl.add(buf[j], 1.0))
        return out

    np.testing.assert_allclose(nki.simulate(two_loops, X, target="trn2")[0], np.exp(X) + 1, rtol=1e-6)


def test_past_the_replay_bound_the_per_iteration_check_stands_in(monkeypatch, rejected):
    from nki_dsl.verify import block_schedule

    monkeypatch.setattr(block_schedule, "MAX_EVENTS", 4)
    # a loop whose own iteration touches two blocks of one slot is still refused ...
    err = rejected(_pipeline(slots=1, distance=2), X8)
    assert "are in use at the same time (one iteration's accesses touch both)" in str(err), str(err)
    # ... and the prologue's constant indices are set aside, as documented
    nki.trace(_pipeline(slots=2, distance=3), X8)


@pytest.mark.parametrize("n", [4, 5, 8])
def test_past_the_replay_bound_a_loop_whose_every_iteration_overwrites_a_live_block_is_refused(monkeypatch,
                                                                                               rejected, n):
    # One slot for a prefetch distance of 2: iteration i reads block i and writes block i + 2 into the same slot.
    # The per-iteration check slides the blocks one iteration touches ({i, i + 2}) over every iteration, the
    # first ones included: with 4 blocks the loop has only 2 iterations, and only their windows hold two blocks.
    from nki_dsl.verify import block_schedule

    monkeypatch.setattr(block_schedule, "MAX_EVENTS", 4)
    err = rejected(_pipeline(slots=1, distance=2, n=n), X8[:n * 128])
    assert "are in use at the same time (one iteration's accesses touch both)" in str(err), str(err)


def test_a_family_proof_uses_the_per_iteration_check_over_symbolic_loops(traced):
    # verify/family.py sets SYMBOLIC_LOOPS while it checks a family's lowest instance: the replay counts iterations,
    # which differ between instances, so over such loops the blind per-iteration check decides (here it refuses
    # the prefetch into the slot just read, which the replay accepts)
    from nki_dsl.passes.verifier import verify_kernel
    from nki_dsl.verify.block_schedule import SYMBOLIC_LOOPS

    ir = traced(_pipeline(slots=2, distance=2), X8)
    assert verify_kernel(ir, nki.get_target("trn2")) == []
    loop = next(s for s in ir.body if hasattr(s, "var"))
    token = SYMBOLIC_LOOPS.set(frozenset({loop.var}))
    try:
        found = verify_kernel(ir, nki.get_target("trn2"))
    finally:
        SYMBOLIC_LOOPS.reset(token)
    assert [d.rule for d in found] == ["direct-allocation"]
    assert "one iteration's accesses touch both" in found[0].message


def test_the_replay_counts_every_grid_instance_against_its_event_budget(traced, monkeypatch):
    """The exact replay (which accepts the prefetch into the slot just read) runs only while the block accesses of
    all grid instances fit MAX_EVENTS; past it the per-iteration check decides (and refuses it). A 2x3 grid makes
    6 instances: 6x the one-instance count fits exactly, one access less of budget does not."""
    import dataclasses

    from nki_dsl.passes.verifier import verify_kernel
    from nki_dsl.verify import block_schedule

    ir = traced(_pipeline(slots=2, distance=2), X8)
    trn2 = nki.get_target("trn2")

    def rules(kernel, budget):
        monkeypatch.setattr(block_schedule, "MAX_EVENTS", budget)
        return [d.rule for d in verify_kernel(kernel, trn2)]

    lo, hi = 0, 100_000  # the one-instance kernel's event count: the least budget that keeps the replay
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rules(ir, mid) == [] else (mid, hi)
    events = hi
    assert rules(ir, events - 1) == ["direct-allocation"]
    grid = dataclasses.replace(ir, grid=(2, 3))
    assert rules(grid, 6 * events) == []
    assert rules(grid, 6 * events - 1) == ["direct-allocation"]


def test_past_the_replay_bound_blocks_indexed_by_different_loops_are_refused_naming_both_uses(monkeypatch, rejected):
    # The per-iteration check cannot tell which iteration of one loop meets which of the other: blocks in shared
    # space count as in use at once, and the diagnostic names the two uses whose loop indices differ.
    from nki_dsl.verify import block_schedule

    monkeypatch.setattr(block_schedule, "MAX_EVENTS", 4)

    err = rejected(two_loops, X)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    write, read = _line_of(two_loops, "buf[i] = "), _line_of(two_loops, "value=buf[j]")
    assert (f"blocks [0] and [2] share space (partitions 0..127, bytes 0..255), and the tensor is indexed with "
            f"different loop indices at line {write} ([i0]) and line {read} ([i1]): a block may be read after a "
            f"later block took its space") in str(err), str(err)


def _two_blocks_read_at_once(slots: int):
    """Blocks 0 and 1 of a 4-block tensor (``slots`` slots) written one by one, then stored by one access that
    reads both (its block index runs over an axis)."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 2, 64), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(slots,)))
        for b in nl.static_range(2):
            buf[b] = nl.load(x[b * 128:(b + 1) * 128, :])
        ip, ib, jf = nl.arange(128)[:, None, None], nl.arange(2)[None, :, None], nl.arange(64)[None, None, :]
        nl.store(out[ip, ib, jf], value=buf[ib, ip, jf])
        return out

    return kernel


def test_an_access_spanning_too_many_blocks_to_list_counts_as_using_every_block(monkeypatch, rejected):
    # Past the replay bound, the per-iteration check lists the block offsets each access touches, up to
    # _MAX_WINDOW of them; an access spanning more counts as touching every block of that dimension (the safe
    # answer), so blocks 0 and 2, which share a slot, are then taken as in use at once.
    from nki_dsl.verify import block_schedule
    from nki_dsl.verify.rules import direct_allocation

    x = X[:256]
    monkeypatch.setattr(block_schedule, "MAX_EVENTS", 1)
    np.testing.assert_array_equal(_two_blocks_read_at_once(slots=2)(x), x.reshape(2, 128, 64).transpose(1, 0, 2))
    monkeypatch.setattr(direct_allocation, "_MAX_WINDOW", 2)  # exactly the store's 2 offsets: still listed
    nki.trace(_two_blocks_read_at_once(slots=2), x)
    monkeypatch.setattr(direct_allocation, "_MAX_WINDOW", 1)
    err = rejected(_two_blocks_read_at_once(slots=2), x)
    assert ("blocks [0] and [2] share space (partitions 0..127, bytes 0..255) but are in use at the same time"
            in str(err)), str(err)


def _blocks_written_then_two_read(blocks: int, written: tuple[int, ...]):
    """A kernel writing the blocks ``written`` of a ``blocks``-block tensor (two slots: block b in slot b % 2) one
    by one with constant indices, then storing blocks 0 and 1 through one access whose block index runs over an
    axis."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 2, 64), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((blocks, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for b in written:
            buf[b] = nl.load(x[(b % 2) * 128:(b % 2 + 1) * 128, :])
        ip, ib, jf = nl.arange(128)[:, None, None], nl.arange(2)[None, :, None], nl.arange(64)[None, None, :]
        nl.store(out[ip, ib, jf], value=buf[ib, ip, jf])
        return out

    return kernel


@pytest.mark.parametrize("replay", [True, False])
def test_a_block_written_with_a_constant_index_over_one_an_access_spanning_an_axis_still_reads_is_refused(
        monkeypatch, rejected, replay):
    # Block 2 takes block 0's slot before the store reads blocks 0 and 1. Past the replay bound the per-iteration
    # check compares the constant-indexed writes with the store: an axis in a block index is no loop index.
    from nki_dsl.verify import block_schedule

    if not replay:
        monkeypatch.setattr(block_schedule, "MAX_EVENTS", 1)
    nki.trace(_blocks_written_then_two_read(4, (0, 1)), X[:256])
    err = rejected(_blocks_written_then_two_read(4, (0, 1, 2)), X[:256])
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    assert "blocks [0] and [2] share space" in str(err), str(err)


def test_past_the_replay_bound_a_block_no_access_touches_may_share_space_with_a_used_one(monkeypatch):
    # Parsed IR can place blocks freely: here block 2 shares block 1's space, and no access touches block 2. The
    # per-iteration check slides a window only along loop indices; these accesses have none.
    from nki_dsl.verify import block_schedule

    text = nki.trace(_blocks_written_then_two_read(3, (0, 1)), X[:256]).text
    placed = "{address = (0, 0, 0, 256, 0, 0)}"
    assert placed in text, text
    shared = text.replace(placed, "{address = (0, 0, 0, 256, 0, 256)}")
    nki.parse_ir(shared)
    monkeypatch.setattr(block_schedule, "MAX_EVENTS", 1)
    nki.parse_ir(shared)


@pytest.mark.parametrize("address, message", [
    ("(0, 0, 0, 256, 0)", "address has 5 entries; a tensor with 4 blocks needs 8 (start partition, byte offset "
                          "per block)"),
    ("(0, 0, 0, 256, 0, 512, 0, -768)", "address [0, 0, 0, 256, 0, 512, 0, -768] has a negative entry"),
])  # fmt: skip
def test_parsed_ir_with_a_malformed_address_is_refused(address, message):
    # only parsed IR can give an address the tracer would not build: a pair per block or one pair in all
    from nki_dsl.errors import NkiVerificationError

    text = nki.trace(_double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,))), X).text
    placed = "{address = (0, 0, 0, 256, 0, 512, 0, 768)}"
    assert placed in text, text
    with pytest.raises(NkiVerificationError) as err:
        nki.parse_ir(text.replace(placed, f"{{address = {address}}}"))
    assert {d.rule for d in err.value.diagnostics} == {"direct-allocation"}
    assert message in str(err.value), str(err.value)
    nki.parse_ir(text.replace(placed, "{address = (0, 1024)}"))  # one pair: the blocks side by side from there


def _quarter_tile(start: int):
    """A 32-partition tensor placed at partition ``start``."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((1, nl.par_dim(32), 64), nl.float32, buffer=ncc.sbuf.alloc(lambda idx, p, f: (start, 0)))
        buf[0] = nl.load(x)
        nl.store(out, value=nl.exp(buf[0]))
        return out

    return kernel


@pytest.mark.parametrize("start", [32, 96])
def test_a_tensor_of_a_quarter_of_the_partitions_starts_at_any_quarter(start):
    np.testing.assert_allclose(_quarter_tile(start)(X[:32]), np.exp(X[:32]), rtol=1e-6)


@pytest.mark.parametrize("start", [16, 25, 48])
def test_a_tensor_of_a_quarter_of_the_partitions_starting_off_a_quarter_is_refused(rejected, start):
    err = rejected(_quarter_tile(start), X[:32])
    assert f"a 32-partition tensor starts at a multiple of 32 partitions, not at partition {start}" in str(err), \
        str(err)
