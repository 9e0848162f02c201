"""The ``psum-banks`` rule refuses exactly the kernels the allocator cannot place in PSUM's 8 banks: at exactly 8
banks live and at 9, for a 3x3-block tensor whose blocks each take a bank or share one, where the banks live
are enough but not next to each other (fragmentation, which a count of live banks accepted and the allocator
refused), around a tile the kernel placed part-way into a bank, with the PSUM tile lowering adds for an
``nl.matmul``'s transposed operand, and on generated kernels (tensors of 1 to 3 banks made and dropped in any
order, in loops and across them).

What was wrong before (issue 14): the rule counted live banks on the traced kernel, the allocator placed the
lowered one first fit in program order. They disagreed on (1) fragmentation: free banks that are not adjacent
for a tensor of several banks (the rule accepted, the allocator refused); (2) lowering: ``nl.matmul`` of an
untransposed operand transposes it through a PSUM tile the traced kernel does not have (the rule accepted 8 live
banks, the allocator needed 9); (3) a tensor the kernel placed at a byte inside a bank: the rule held that bank,
the allocator held the bytes from there on and started the next tile mid-bank (it refused 8 banks the rule
accepted). Now the allocator places PSUM as it does SBUF (one copy each, program order, then largest first;
a placed tensor holds its banks) and the rule asks it about the lowered kernel."""

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.compiler as ncc
import nki_dsl.language as nl
from nki_dsl.passes.allocate import live_ranges
from nki_dsl.targets import get_target
from tests.verify.placing import disjoint_while_live, outcome, plans

TRN2 = get_target("trn2")
BANK = TRN2.psum_bank_bytes  # 2 KiB per partition, 8 of them (reference/nki.md §1.1)


def _kernel(plan):
    """A kernel running ``plan``: ("def", k, banks) makes a zeroed PSUM tensor of ``banks`` fp32 banks (blocks of
    [128, 512], all live together), ("end", k) copies its last block out and stores it (its last use), ("use", k)
    does so without ending it, ("loop", body) runs ``body`` twice in a sequential loop (tensors made there rotate;
    tensors used there from outside stay live to its end)."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = {}

        def run(events):
            for ev in events:
                if ev[0] == "def":
                    shape = (128, 512) if ev[2] == 1 else (ev[2], nl.par_dim(128), 512)
                    tiles[ev[1]] = (nl.zeros(shape, nl.float32, buffer=nl.psum), ev[2])
                elif ev[0] in ("end", "use"):
                    t, banks = tiles[ev[1]]
                    nl.store(out, value=nl.copy(t if banks == 1 else t[banks - 1], dtype=nl.float32))
                else:
                    for _ in nl.sequential_range(2):
                        run(ev[1])

        run(plan)
        return out

    return kernel


X = nki.spec((128, 512), "float32")


def _outcome(kernel, *args):
    """(the verifier's diagnostics, all of rule psum-banks; whether the allocator placed the lowered kernel)."""
    return outcome(kernel, args or (X,), "psum-banks", _valid)


def _valid(low, alloc):
    """Inside PSUM, every tile the allocator chose on a bank boundary, and tensors live at once share no bank."""
    lives = {lv.tensor.name: lv for lv in live_ranges(low)}
    placed = [p for p in alloc.placements.values() if p.buffer == "psum"]
    assert all(p.byte_offset % BANK == 0 for p in placed if lives[p.tensor].op.attrs.get("address") is None)
    disjoint_while_live(low, alloc, "psum", TRN2.psum_bytes_per_partition,
                        lambda p: (p.byte_offset // BANK, -(-(p.byte_offset + p.footprint) // BANK)))


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _live_at_once(n):
    return [("def", k, 1) for k in range(n)] + [("end", k) for k in range(n)]


@pytest.mark.parametrize(("n", "fits"), [(8, True), (9, False)])
def test_at_exactly_eight_banks_and_at_nine(n, fits):
    refused, placed = _outcome(_kernel(_live_at_once(n)))
    assert placed is fits and (not refused) is fits
    if not fits:
        assert refused[0].message.startswith("9 PSUM banks are in use here, more than the 8 a NeuronCore has")


def _grid_kernel(others: int, shared: bool):
    """A [3, 3] grid of [128, 512] fp32 PSUM blocks beside ``others`` one-bank tiles. ``shared``: each block is
    written and read in one iteration of loops over both block indices (block-local: one bank for all nine);
    else all nine are zeroed at once and read after (nine banks)."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        held = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(others)]
        if shared:
            grid = nl.ndarray((3, 3, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
            for i in nl.sequential_range(3):
                for j in nl.sequential_range(3):
                    grid[i, j] = nl.load(x)
                    nl.store(out, value=nl.copy(grid[i, j], dtype=nl.float32))
        else:
            grid = nl.zeros((3, 3, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
            nl.store(out, value=nl.copy(grid[2, 2], dtype=nl.float32))
        for t in held:
            nl.store(out, value=nl.copy(t, dtype=nl.float32))
        return out

    return kernel


@pytest.mark.parametrize(("others", "shared", "fits"), [
    (0, False, False),  # nine blocks live together: nine banks
    (7, True, True),  # the blocks share one bank: 8 in all
    (8, True, False),
])  # fmt: skip
def test_a_three_by_three_block_tensor(others, shared, fits):
    refused, placed = _outcome(_grid_kernel(others, shared))
    assert placed is fits and (not refused) is fits
    if not fits:
        assert refused[0].message.startswith("9 PSUM banks are in use here")


# 7 banks live at most, but the last 4-bank tensor finds no 4 adjacent free banks: program order puts the second
# 3-bank tensor where the first 4-bank one was, after the first 3-bank one's banks, leaving banks 0-2 and 6-7;
# largest first fails on the second 3-bank tensor instead. The old rule accepted it.
FRAGMENTED = [("def", 0, 3), ("def", 1, 4), ("end", 1), ("def", 2, 3), ("end", 0), ("def", 3, 4), ("end", 3),
              ("end", 2)]  # fmt: skip


def test_banks_that_fit_in_number_but_not_side_by_side_are_refused(rejected):
    refused, placed = _outcome(_kernel(FRAGMENTED))
    assert refused and not placed
    error = rejected(_kernel(FRAGMENTED), X, target="trn2")
    (diag,) = error.diagnostics
    assert (diag.rule, diag.op) == ("psum-banks", "nl.full")  # (nl.zeros)
    assert diag.message == (
        "PSUM has no room for %6 f32[4, 128, 512] in 'psum' (4 banks): the tensors live with it hold 3 of the 8 "
        "banks, but the free ones are split into runs of at most 3 banks (placed first fit in program order, then "
        "largest first, as the allocator does); live with it: %4 f32[3, 128, 512] in 'psum' (banks 3, 4, 5, line "
        f"{_line_of(_kernel, 'nl.zeros(')}); copy results out of PSUM (nl.copy) sooner or reuse one accumulator")


# First fit puts %7 (2 banks) in banks 0-1, freed by the 4-bank tensor, before %2 and %3 made earlier; the 3-bank
# tensor then finds runs of 2 free banks at most, and largest first fails too.
SCATTERED = [("def", 0, 4), ("def", 1, 1), ("def", 2, 2), ("end", 0), ("def", 3, 1), ("end", 3), ("def", 4, 2),
             ("def", 5, 3), ("end", 5), ("end", 2), ("end", 1), ("end", 4)]  # fmt: skip


def test_the_tensors_live_with_one_that_found_no_room_are_listed_in_bank_order(rejected):
    (diag,) = rejected(_kernel(SCATTERED), X, target="trn2").diagnostics
    line = _line_of(_kernel, "nl.zeros(")
    assert diag.message == (
        "PSUM has no room for %8 f32[3, 128, 512] in 'psum' (3 banks): the tensors live with it hold 5 of the 8 "
        "banks, but the free ones are split into runs of at most 2 banks (placed first fit in program order, then "
        f"largest first, as the allocator does); live with it: %7 f32[2, 128, 512] in 'psum' (banks 0, 1, line "
        f"{line}), %2 f32[128, 512] in 'psum' (bank 4, line {line}), %3 f32[2, 128, 512] in 'psum' (banks 5, 6, "
        f"line {line}); copy results out of PSUM (nl.copy) sooner or reuse one accumulator")


@nki.jit
def _placed_mid_bank(x):
    """A quarter-bank tile the kernel placed at byte 1024 of bank 0, and 7 tiles the allocator places: 8 banks."""
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    fixed = nl.zeros((128, 256), nl.float32, buffer=ncc.psum.mod_alloc(base_bank=0, base_addr=1024))
    accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(7)]
    for a in accs:
        nl.store(out, value=nl.copy(a[:, 0:256], dtype=nl.float32))
    nl.store(out, value=nl.copy(fixed, dtype=nl.float32))
    return out


def test_a_tile_placed_inside_a_bank_holds_that_bank_and_the_others_start_on_banks():
    # (the allocator used to start the next tile at byte 3072, mid-bank, and ran out of room after six)
    assert _outcome(_placed_mid_bank, nki.spec((128, 128), "float32")) == ([], True)


@nki.jit
def _eight_and_a_matmul(x, y):
    """Eight accumulators live, and one gets an ``nl.matmul`` of an untransposed [128, 128] operand: lowering
    transposes it through a ninth PSUM tile."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
    accs[0] += nl.matmul(nl.load(x), nl.load(y))
    for acc in accs:
        nl.store(out, value=nl.copy(acc, dtype=nl.float32))
    return out


def test_the_psum_tile_lowering_adds_is_counted(rejected):
    args = nki.spec((128, 128), "float32"), nki.spec((128, 512), "float32")
    assert _outcome(_eight_and_a_matmul, *args) == (rejected(_eight_and_a_matmul, *args).diagnostics, False)
    (diag,) = rejected(_eight_and_a_matmul, *args).diagnostics
    assert diag.message.startswith("9 PSUM banks are in use here once nl ops are lowered to engine instructions, "
                                   "more than the 8 a NeuronCore has")  # fmt: skip
    assert (diag.op, diag.loc.line) == ("nl.matmul", _line_of(_eight_and_a_matmul.fn, "+="))


# -- generated kernels -----------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(plans(st.sampled_from([1, 1, 2, 3]), 7))  # up to seven PSUM tensors of 1 to 3 banks
def test_the_verifier_accepts_exactly_what_the_allocator_places(plan):
    refused, placed = _outcome(_kernel(plan))
    assert (not refused) is placed, (plan, [d.message for d in refused])


def test_generated_kernels_cover_both_answers():
    """(So the property above is not vacuous: the bank mix gives kernels that fit and kernels that do not.)"""
    assert _outcome(_kernel([("def", k, 3) for k in range(3)] + [("end", k) for k in range(3)]))[1] is False
    assert _outcome(_kernel([("def", 0, 3), ("def", 1, 2), ("end", 0), ("end", 1)]))[1] is True


def test_past_the_placement_bound_the_verifier_and_the_allocator_both_refuse(monkeypatch, rejected):
    from nki_dsl.passes import allocate as allocate_module

    monkeypatch.setattr(allocate_module, "MAX_FIT_WORK", 1)
    plan = _live_at_once(3)
    kernel = _kernel(plan)
    (diag,) = rejected(kernel, X, target="trn2").diagnostics
    assert diag.rule == "psum-banks"
    assert diag.message.startswith("3 PSUM tensors, so many live at once that placing them examined more than the "
                                   "allocator's bound (1 tensors) at %")  # fmt: skip
