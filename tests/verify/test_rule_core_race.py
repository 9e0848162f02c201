"""Rule ``core-race``: in a kernel whose two cores run at once (an LNC=2 launch, or cores meeting at sync ops), no
shared-HBM element is written by one core and touched by the other between the same two sync points (reference/
nki.md §2.7 "Multi-core"); an LNC=2 kernel without sync ops is one phase. A legacy SPMD grid runs its programs one
after another (§1.5) and is not checked."""

from __future__ import annotations

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.current as current
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as cnl
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes.verifier import check
from tests.current_api import lnc_kernels as k

X = np.zeros((2, 128, 64), np.float32)


def test_exchanges_ordered_by_sync_ops_and_disjoint_parts_are_accepted():
    for kernel in (k.exchange_sum, k.barrier_swap):
        nki.trace(kernel[2], X)


def test_golden_reusing_a_scratch_the_peer_still_reads(golden, rejected):
    golden("core-race", rejected(k.reuse_scratch[2], X))


def test_legacy_spmd_grids_without_sync_ops_are_not_checked():
    # an SPMD grid's programs run one after another (§1.5): what one writes the next may read
    import nki_dsl.language as nl

    @nki.jit
    def serial(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x[nl.program_id(0)]))
        return out

    nki.trace(serial[2], X)


def test_a_shape_family_cannot_hold_sync_ops():
    # core-race's phases follow trip counts, so it is argued for concrete kernels only (verify/family.py)
    import nki_dsl.current as current
    import nki_dsl.current.isa as nisa
    import nki_dsl.current.language as cnl

    @current.jit
    def family_barrier(x):
        out = cnl.ndarray(x.shape, cnl.float32, buffer=cnl.shared_hbm)
        t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:128, :])
        nisa.dma_copy(dst=out[0:128, :], src=t)
        flag = cnl.ndarray((1, 1), cnl.float32, buffer=cnl.shared_hbm)
        nisa.core_barrier(flag, (0, 1))
        return out

    with pytest.raises(nki.NkiError, match="a shape family cannot hold sync ops"):
        nki.trace(family_barrier[2], nki.spec(("N", 64), "float32", dims={"N": (128, 1024)}))


# -- LNC=2 kernels without sync ops: one phase, the cores at once -------------------------------------------------
@current.jit
def both_write_everything(x):
    """Each core stores the whole of x[0] into the whole output: the two cores write the same elements."""
    out = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.shared_hbm)
    t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=t, src=x[0])
    nisa.dma_copy(dst=out, src=t)
    return out


@current.jit
def reads_the_peers_half(x):
    """Core c writes its half of the output, then reads the other core's half back: one writes what the other
    reads, and nothing orders them."""
    out = cnl.ndarray((2, 128, 64), cnl.float32, buffer=cnl.shared_hbm)
    c = cnl.program_id(0)
    t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=t, src=x[c])
    nisa.dma_copy(dst=out[c], src=t)
    peer = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=peer, src=out[1 - c])
    nisa.tensor_tensor(dst=t, data1=t, data2=peer, op=cnl.add)
    nisa.dma_copy(dst=x[c], src=t)
    return out


@current.jit
def split_by_program_id(x):
    """The ordinary LNC=2 kernel: core c takes rows [256 c, 256 c + 256) in 128-row tiles, both read one shared
    [1, 64] bias, each writes its own rows and its own column of a [128, 2] summary."""
    rows = x.shape[0] // 2
    out = cnl.ndarray(x.shape, cnl.float32, buffer=cnl.shared_hbm)
    sums = cnl.ndarray((128, 2), cnl.float32, buffer=cnl.shared_hbm)
    c = cnl.program_id(0)
    total = cnl.ndarray((128, 1), cnl.float32, buffer=cnl.sbuf)
    nisa.memset(dst=total, value=0.0)
    for i in cnl.affine_range(rows // 128):
        t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
        nisa.dma_copy(dst=t, src=x[cnl.ds(c * rows + i * 128, 128), :])
        nisa.tensor_scalar(dst=t, data=t, op0=cnl.multiply, operand0=3.0)
        nisa.dma_copy(dst=out[cnl.ds(c * rows + i * 128, 128), :], src=t)
        row = cnl.ndarray((128, 1), cnl.float32, buffer=cnl.sbuf)
        nisa.tensor_reduce(dst=row, op=cnl.add, data=t, axis=1, keepdims=True)
        nisa.tensor_tensor(dst=total, data1=total, data2=row, op=cnl.add)
    nisa.dma_copy(dst=sums[:, cnl.ds(c, 1)], src=total)
    return out, sums


def test_golden_an_lnc2_kernel_whose_cores_write_the_same_elements(golden, rejected):
    golden("core-race", rejected(both_write_everything[2], X), "no-sync-write")


def test_golden_an_lnc2_kernel_where_one_core_reads_what_the_other_writes(golden, rejected):
    error = rejected(reads_the_peers_half[2], X)
    golden("core-race", error, "no-sync-read")
    # out[c] (written) against out[1 - c] (read), and the in-place x[c] against nothing: one diagnostic
    assert len(error.diagnostics) == 1


@current.jit
def reads_core_1s_half(x):
    """Core c writes its half of the output, then both cores read core 1's half: only core 1's write races (with
    core 0's read)."""
    out = cnl.ndarray((2, 128, 64), cnl.float32, buffer=cnl.shared_hbm)
    c = cnl.program_id(0)
    t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=t, src=x[c])
    nisa.dma_copy(dst=out[c], src=t)
    peer = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=peer, src=out[1])
    nisa.tensor_tensor(dst=t, data1=t, data2=peer, op=cnl.add)
    nisa.dma_copy(dst=x[c], src=t)
    return out


def test_a_race_only_core_1_writes_into_names_core_1_as_the_writer_and_core_0_as_the_reader(rejected):
    (d,) = rejected(reads_core_1s_half[2], X).diagnostics
    assert d.rule == "core-race"
    assert d.message.startswith("core 1 writes %0[128, 64] in 'shared_hbm' and core 0 reads %0[128, 64]"), d.message


@current.jit
def reads_the_peers_half_through_a_view_of_a_view(x):
    """``reads_the_peers_half`` with the read going through a reshape of a reshape of the output."""
    out = cnl.ndarray((2, 128, 64), cnl.float32, buffer=cnl.shared_hbm)
    c = cnl.program_id(0)
    t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=t, src=x[c])
    nisa.dma_copy(dst=out[c], src=t)
    again = out.reshape((256, 64)).reshape((2, 128, 64))
    peer = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=peer, src=again[1 - c])
    nisa.tensor_tensor(dst=t, data1=t, data2=peer, op=cnl.add)
    nisa.dma_copy(dst=x[c], src=t)
    return out


def test_a_race_through_a_view_of_a_view_of_the_tensor_is_reported(rejected):
    (d,) = rejected(reads_the_peers_half_through_a_view_of_a_view[2], X).diagnostics
    assert d.rule == "core-race"
    assert d.message.startswith("core 0 writes %0[128, 64] in 'shared_hbm' and core 1 reads "), d.message


def test_kernels_split_by_program_id_are_accepted_and_compute_their_formula():
    x = np.random.default_rng(5).standard_normal((512, 64)).astype(np.float32)
    out, sums = split_by_program_id[2](x)
    np.testing.assert_allclose(out, 3.0 * x.astype(np.float64), rtol=1e-6)
    want = 3.0 * x.astype(np.float64).reshape(2, 2, 128, 64).sum(axis=(1, 3)).T
    np.testing.assert_allclose(sums, want, rtol=1e-5, atol=1e-4)
    nki.trace(split_by_program_id[2], x)
    nki.trace(both_write_everything, X)  # on one core (lnc 1) nothing races


def test_the_ir_text_says_lnc_2_and_the_rule_reads_it():
    x = np.zeros((512, 64), np.float32)
    text = nki.trace(split_by_program_id[2], x).text
    assert "\n  grid (2,)\n  lnc 2\n" in text
    assert "lnc" not in nki.trace(split_by_program_id, x).text.split("source")[0]  # lnc 1 prints no line
    ir = parse_kernel(text)
    assert ir.lnc == 2
    check(ir, nki.get_target("trn2"))
    # hostile IR: the rows of core 1 moved onto core 0's (pid0 dropped from the store's index)
    racy = text.replace("nisa.dma_copy(dst=%0[d0 + 128*i0 + 256*pid0, d1", "nisa.dma_copy(dst=%0[d0 + 128*i0, d1")
    assert racy != text
    with pytest.raises(nki.NkiVerificationError) as e:
        check(parse_kernel(racy), nki.get_target("trn2"))
    (d,) = e.value.diagnostics
    assert d.rule == "core-race" and d.op == "nisa.dma_copy"
    assert d.message.startswith("core 0 writes %0[128, 64] in 'shared_hbm' and core 1 writes %0[128, 64] in "
                                "'shared_hbm' at this line in the same phase")
    # the same text as an SPMD grid (no lnc line): its programs run one after another, nothing to refuse
    check(parse_kernel(racy.replace("  lnc 2\n", "")), nki.get_target("trn2"))


@pytest.mark.parametrize("line, message", [
    ("  lnc 3", "lnc 3 with grid (2,): an LNC launch runs on 2 NeuronCores"),
    ("  lnc 1", "lnc 1 with grid (2,)"),
])  # fmt: skip
def test_hostile_lnc_lines_are_refused_by_the_reader(line, message):
    text = nki.trace(both_write_everything, X).text.replace("  grid ()", f"  grid (2,)\n{line}")
    with pytest.raises(nki.NkiError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_kernel(text)
    one_core = nki.trace(both_write_everything, X).text.replace("  grid ()", "  grid ()\n  lnc 2")
    with pytest.raises(nki.NkiError, match=r"lnc 2 with grid \(\): an LNC launch runs on 2 NeuronCores"):
        parse_kernel(one_core)


def test_both_readers_read_the_lnc_line_alike():
    from nki_dsl.ir import parser
    from nki_dsl.ir.budget import DEFAULT_BUDGET
    from nki_dsl.ir.fastread import Reader
    from nki_dsl.ir.printer import print_kernel

    text = nki.trace(split_by_program_id[2], np.zeros((512, 64), np.float32)).text
    fast = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(Reader(text).start())
    slow = parser._Builder("<nkir>", DEFAULT_BUDGET).kernel(parser._lark().parse(text))
    assert print_kernel(fast) == print_kernel(slow) == text and fast.lnc == slow.lnc == 2


def test_an_lnc2_launch_cannot_be_a_shape_family():
    @current.jit
    def family_split(x):
        out = cnl.ndarray(x.shape, cnl.float32, buffer=cnl.shared_hbm)
        t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
        nisa.dma_copy(dst=t, src=x[cnl.ds(cnl.program_id(0) * 128, 128), :])
        nisa.dma_copy(dst=out[cnl.ds(cnl.program_id(0) * 128, 128), :], src=t)
        return out

    with pytest.raises(nki.NkiError, match="a shape family cannot be an LNC=2 launch"):
        nki.trace(family_split[2], nki.spec(("N", 64), "float32", dims={"N": (256, 1024)}))


def unrolled_tiles(overlap_at):
    """Core c copies its 128-row tiles of x (unrolled: one op per tile); tile ``overlap_at`` of core 1 lands on
    core 0's tile of the same number, every other tile on the core's own rows."""

    @current.jit
    def k(x):
        rows = x.shape[0] // 2
        out = cnl.ndarray(x.shape, cnl.float32, buffer=cnl.shared_hbm)
        c = cnl.program_id(0)
        for i in cnl.static_range(rows // 128):
            t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
            nisa.dma_copy(dst=t, src=x[cnl.ds(c * rows + i * 128, 128), :])
            start = i * 128 if i == overlap_at else c * rows + i * 128
            nisa.dma_copy(dst=out[cnl.ds(start, 128), :], src=t)
        return out

    return k


def test_among_many_disjoint_tiles_the_one_overlapping_pair_is_found():
    x = np.zeros((64 * 256, 64), np.float32)
    nki.trace(unrolled_tiles(-1)[2], x)  # 128 tiles, all disjoint
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(unrolled_tiles(37)[2], x)
    (d,) = e.value.diagnostics
    assert d.rule == "core-race" and d.message.startswith("core 0 writes %0[128, 64] in 'shared_hbm' and core 1 "
                                                          "writes %0[128, 64] in 'shared_hbm' at this line")


@current.jit
def gather_rows_the_other_core_writes(x, idx):
    """Core c writes rows [128 + 128 c, 256 + 128 c) of ``out`` and gathers the rows ``idx`` names from it: nominally
    rows [0, 128), which neither core writes, but the indices may pick any row."""
    out = cnl.ndarray((384, 32), cnl.float32, buffer=cnl.shared_hbm)
    got = cnl.ndarray((256, 32), cnl.float32, buffer=cnl.shared_hbm)
    c = cnl.program_id(0)
    t = cnl.ndarray((128, 32), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out[cnl.ds(128 + c * 128, 128), :], src=t)
    i = cnl.ndarray((128, 1), cnl.int32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=i, src=idx)
    g = cnl.ndarray((128, 32), cnl.float32, buffer=cnl.sbuf)
    nisa.dma_copy(dst=g, src=out.ap([[32, 128], [1, 32]], vector_offset=i, indirect_dim=0))
    nisa.dma_copy(dst=got[cnl.ds(c * 128, 128), :], src=g)
    return out, got


def test_a_gather_may_read_any_row_so_rows_the_other_core_writes_race(rejected):
    d = rejected(gather_rows_the_other_core_writes[2], np.zeros((128, 32), np.float32),
                 np.zeros((128, 1), np.int32)).diagnostics  # fmt: skip
    assert {x.rule for x in d} == {"core-race"}
    assert d[0].message.startswith("core 0 writes %0[128, 32] in 'shared_hbm' and core 1 reads %0[128, 32, 384] in "
                                   "'shared_hbm' at line")  # fmt: skip
