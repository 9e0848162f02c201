"""Every verifier limit at exactly the limit (accepted) and one past it (refused), and the index arithmetic of
``out-of-bounds`` on masks with coefficients, offsets, broadcast operands and several variables. Each test pins a
behaviour a plausible slip in the rule would change; the limits come from the target table, not from copies."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.targets import TARGETS, shared_fact

A = np.zeros((128, 512), np.float32)
PSUM_BANKS, PSUM_BANK_BYTES = shared_fact("psum_banks"), shared_fact("psum_bank_bytes")  # verified on every target


def rules(error) -> list[str]:
    return [d.rule for d in error.diagnostics]


# --- psum-banks ---------------------------------------------------------------------------------------------------


@nki.jit
def live_accumulators(a, count, free):
    """``count`` PSUM tiles of ``free`` fp32 per partition, all live at the sum."""
    out = nl.ndarray((128, free), dtype=a.dtype, buffer=nl.shared_hbm)
    accs = [nl.zeros((128, free), nl.float32, buffer=nl.psum) for _ in range(count)]
    total = nl.copy(accs[0])
    for acc in accs[1:]:
        total = nl.add(total, acc)
    nl.store(out, value=total)
    return out


def test_exactly_every_psum_bank_live_is_accepted(traced):
    traced(live_accumulators, A, count=PSUM_BANKS, free=PSUM_BANK_BYTES // 4)


def test_one_bank_past_the_psum_banks_is_refused(rejected):
    error = rejected(live_accumulators, A, count=PSUM_BANKS + 1, free=PSUM_BANK_BYTES // 4)
    assert rules(error) == ["psum-banks"]
    assert error.diagnostics[0].message.startswith(f"{PSUM_BANKS + 1} PSUM banks are in use here")


def test_a_tile_of_half_a_bank_takes_a_whole_bank(rejected, traced):
    # 256 fp32 per partition is 1 KiB, half a bank: each tile still starts a bank of its own (§1.1).
    traced(live_accumulators, A, count=PSUM_BANKS, free=PSUM_BANK_BYTES // 4 // 2)
    error = rejected(live_accumulators, A, count=PSUM_BANKS + 1, free=PSUM_BANK_BYTES // 4 // 2)
    assert rules(error) == ["psum-banks"]
    assert error.diagnostics[0].message.startswith(f"{PSUM_BANKS + 1} PSUM banks are in use here")


def test_tiles_over_a_bank_count_every_bank_they_touch(rejected):
    # 768 fp32 per partition is a bank and a half: refused by psum-tile-size, and it holds two banks, so five of
    # them are ten banks, over the PSUM the core has.
    error = rejected(live_accumulators, A, count=5, free=PSUM_BANK_BYTES // 4 * 3 // 2)
    assert "psum-banks" in rules(error)
    (diag,) = [d for d in error.diagnostics if d.rule == "psum-banks"]
    assert diag.message.startswith("10 PSUM banks are in use here")


@nki.jit
def psum_blocks(a, blocks):
    """One PSUM block tensor of ``blocks`` blocks of one bank each, every block written and read."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((*blocks, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)
    nl.store(out, value=nl.copy(acc[(0,) * len(blocks)]))
    return out


def test_a_two_by_four_block_psum_tensor_fills_every_bank(traced):
    assert PSUM_BANKS == 2 * 4  # the shape below fills PSUM exactly
    traced(psum_blocks, A, blocks=(2, 4))


def test_a_three_by_three_block_psum_tensor_counts_nine_banks(rejected):
    error = rejected(psum_blocks, A, blocks=(3, 3))
    assert rules(error) == ["psum-banks"]
    assert error.diagnostics[0].message.startswith("9 PSUM banks are in use here")



@nki.jit
def product_copied_then_read_again(a, held):
    """``held`` live PSUM accumulators and a matmul product in PSUM that the next statement copies to SBUF and a
    later one reads again: the product is a buffer of its own, not written straight into the copy's destination."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    x, y = nl.load(a[:, 0:128]), nl.load(a)
    accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(held)]
    copied = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    product = nl.matmul(x, y, transpose_x=True)
    copied[...] = product
    total = nl.add(copied, product)
    for acc in accs:
        total = nl.add(total, acc)
    nl.store(out, value=total)
    return out


def test_a_psum_result_read_again_after_its_copy_takes_a_bank_in_the_kernel_as_written(traced, rejected):
    # A result used only as the source of the assign right after it is written into the assign's destination and
    # takes no PSUM; read once more later, it must be counted already on the traced kernel, not only once nl ops
    # are lowered (the source-level diagnostic is the one that names what the user wrote).
    traced(product_copied_then_read_again, A, held=PSUM_BANKS - 1)
    error = rejected(product_copied_then_read_again, A, held=PSUM_BANKS)
    assert rules(error) == ["psum-banks"]
    assert error.diagnostics[0].message.startswith(f"{PSUM_BANKS + 1} PSUM banks are in use here, more than")

# --- sbuf-capacity --------------------------------------------------------------------------------------------------


@nki.jit
def one_byte_tile(a, width):
    out = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.shared_hbm)
    t = nl.zeros((128, width), dtype=nl.uint8, buffer=nl.sbuf)
    nl.store(out, value=t[:, 0:512])
    return out


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_sbuf_exactly_full_is_accepted(target, traced):
    traced(one_byte_tile, A.astype(np.uint8), width=TARGETS[target].sbuf_bytes_per_partition, target=target)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_sbuf_one_byte_past_full_is_refused(target, rejected):
    cap = TARGETS[target].sbuf_bytes_per_partition
    error = rejected(one_byte_tile, A.astype(np.uint8), width=cap + 1, target=target)
    assert rules(error) == ["sbuf-capacity"]


# --- out-of-bounds: the last element and one past it -----------------------------------------------------------------


@nki.jit
def rows_from(a, first):
    """Load 128 rows of ``a`` starting at row ``first``."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a[first + nl.arange(128)[:, None], nl.arange(512)[None, :]]))
    return out


def test_reading_up_to_the_last_row_is_accepted(traced):
    traced(rows_from, np.zeros((200, 512), np.float32), first=200 - 128)


def test_reading_one_row_past_the_end_is_refused(rejected):
    error = rejected(rows_from, np.zeros((200, 512), np.float32), first=200 - 128 + 1)
    assert rules(error) == ["out-of-bounds"]
    assert "index range [73, 200] exceeds dimension size of 200" in error.diagnostics[0].message


def test_reading_from_one_row_before_the_start_is_refused(rejected):
    error = rejected(rows_from, np.zeros((200, 512), np.float32), first=-1)
    assert rules(error) == ["out-of-bounds"]
    assert "goes below 0" in error.diagnostics[0].message


@nki.jit
def loop_rows(a, trips, start):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(start, trips):
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(a[i * 128:(i + 1) * 128, :]))
    return out


def test_a_loop_from_a_non_zero_start_ending_at_the_last_tile_is_accepted(traced):
    traced(loop_rows, np.zeros((384, 512), np.float32), trips=3, start=1)


def test_a_loop_from_a_non_zero_start_one_tile_too_far_is_refused(rejected):
    error = rejected(loop_rows, np.zeros((384, 512), np.float32), trips=4, start=2)
    assert set(rules(error)) == {"out-of-bounds"}
    assert "i0 in [2, 3]" in error.diagnostics[0].message


# --- out-of-bounds: masks with coefficients and offsets ------------------------------------------------------------


@nki.jit
def scaled_mask(a, limit):
    """128-row tile over ``a``'s rows, masked to ``2 * row < limit``."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p, i_f], mask=(2 * i_p < limit))
    nl.store(out[i_p, i_f], value=x, mask=(2 * i_p < limit))
    return out


def test_a_scaled_mask_ending_at_the_last_row_is_accepted(traced):
    # 2*p < 200 holds up to p = 99 (floor of 199/2), the last of 100 rows.
    traced(scaled_mask, np.zeros((100, 512), np.float32), limit=200)


def test_a_scaled_mask_with_an_odd_limit_rounds_down(traced, rejected):
    traced(scaled_mask, np.zeros((100, 512), np.float32), limit=199)  # p <= 99
    error = rejected(scaled_mask, np.zeros((100, 512), np.float32), limit=201)  # p <= 100: one past
    assert set(rules(error)) == {"out-of-bounds"}
    assert "index range [0, 100]" in error.diagnostics[0].message


@nki.jit
def shifted_by_lower_mask(a, bound):
    """Reads row ``p - 3`` for the rows the mask ``2 * p >= bound`` keeps."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a[i_p - 3, i_f], mask=(2 * i_p >= bound))
    nl.store(out[i_p, i_f], value=x, mask=(2 * i_p >= bound))
    return out


def test_a_scaled_lower_mask_rounds_up(traced, rejected):
    traced(shifted_by_lower_mask, A, bound=5)  # 2p >= 5 keeps p >= 3 (ceil of 5/2): rows from 0
    error = rejected(shifted_by_lower_mask, A, bound=4)  # p >= 2: row -1
    assert set(rules(error)) == {"out-of-bounds"}
    assert "goes below 0" in error.diagnostics[0].message


@nki.jit
def ragged_two_variable_mask(a, limit):
    """Rows ``128*i + p`` masked by ``p + i < limit``: a constraint whose terms are not a multiple of the index."""
    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a[i * 128 + i_p, i_f], mask=(i_p + i < limit))
        nl.store(out[i * 128 + i_p, i_f], value=x)
    return out


def test_a_mask_over_other_terms_does_not_bound_the_index(rejected):
    # p + i < 130 holds everywhere (p <= 127, i <= 1), so rows up to 255 are read from 172.
    error = rejected(ragged_two_variable_mask, np.zeros((172, 512), np.float32), limit=130)
    assert rules(error) == ["out-of-bounds"]
    assert "index range [0, 255] exceeds dimension size of 172" in error.diagnostics[0].message


@nki.jit
def add_broadcast_column(a, b, first_row):
    """``a + b`` over the columns from 300 on, ``b`` a [128, 1] tile broadcast along the free axis and read from
    partition ``first_row``."""
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a)
    y = nl.load(b)
    s = nl.add(x, y[first_row + i_p, nl.arange(1)[None, :]], mask=(i_f >= 300))
    nl.store(out[i_p, i_f], value=s, mask=(i_f >= 300))
    return out


def test_a_mask_on_the_free_axis_leaves_a_broadcast_operand_in_bounds(traced):
    traced(add_broadcast_column, A, np.zeros((128, 1), np.float32), first_row=0)


def test_a_mask_on_the_free_axis_does_not_hide_an_overrun_of_a_broadcast_operand(rejected):
    # The mask's axis 1 spans 512 columns, the [128, 1] operand's one: the mask says nothing about the operand
    # (on its single column, i_f >= 300 would hold nowhere), so its overrun by one partition is reported.
    error = rejected(add_broadcast_column, A, np.zeros((128, 1), np.float32), first_row=1)
    assert rules(error) == ["out-of-bounds"]
    assert "index range [1, 128] exceeds dimension size of 128" in error.diagnostics[0].message


@nki.jit
def masked_rows_of_loop_tiles(a, limit):
    """Rows ``128*i + p`` for the ``p`` that ``2*p < limit`` keeps: the mask narrows ``p`` on its own (the index is
    no multiple of it)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a[i * 128 + i_p, i_f], mask=(2 * i_p < limit))
        nl.store(out[i * 128 + i_p, i_f], value=x, mask=(2 * i_p < limit))
    return out


def test_a_scaled_mask_narrows_its_variable_down_to_whole_rows(traced, rejected):
    rows = np.zeros((128 + 100, 512), np.float32)
    traced(masked_rows_of_loop_tiles, rows, limit=200)  # p <= 99: last row 227
    traced(masked_rows_of_loop_tiles, rows, limit=199)
    error = rejected(masked_rows_of_loop_tiles, rows, limit=201)  # p <= 100: row 228
    assert set(rules(error)) == {"out-of-bounds"}


@nki.jit
def masked_rows_below(a, bound):
    """Rows ``128*i + p - 3`` for the ``p`` that ``2*p >= bound`` keeps."""
    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a[i * 128 + i_p - 3, i_f], mask=(2 * i_p >= bound))
        nl.store(out[i * 128 + i_p, i_f], value=x, mask=(2 * i_p >= bound))
    return out


def test_a_scaled_lower_mask_narrows_its_variable_up_to_whole_rows(traced, rejected):
    rows = np.zeros((256, 512), np.float32)
    traced(masked_rows_below, rows, bound=5)  # p >= 3 (ceil of 5/2): first row 0
    traced(masked_rows_below, rows, bound=6)
    error = rejected(masked_rows_below, rows, bound=4)  # p >= 2: row -1
    assert set(rules(error)) == {"out-of-bounds"}
    assert "goes below 0" in error.diagnostics[0].message


@nki.jit
def scaled_ragged_tiles(a, limit, bound, shift):
    """The ragged-edge idiom with a scaled mask: rows ``i_p - shift`` with ``i_p = 128*i + p`` and
    ``mask=(bound <= 2*i_p < limit)``: bounds on a multiple of the index itself, which narrowing one variable cannot
    give."""
    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        i_p = i * 128 + nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        x = nl.load(a[i_p - shift, i_f], mask=(2 * i_p < limit) & (2 * i_p >= bound))
        nl.store(out[i_p, i_f], value=x)
    return out


def test_a_scaled_ragged_mask_bounds_the_index_rounding_down(traced, rejected):
    rows = np.zeros((228, 512), np.float32)
    traced(scaled_ragged_tiles, rows, limit=2 * 228, bound=0, shift=0)  # i_p <= 227.5, so row 227
    error = rejected(scaled_ragged_tiles, rows, limit=2 * 228 + 1, bound=0, shift=0)  # i_p <= 228: one past
    assert rules(error) == ["out-of-bounds"]
    assert "index range [0, 228]" in error.diagnostics[0].message


def test_a_scaled_ragged_lower_mask_bounds_the_index_rounding_up(traced, rejected):
    rows = np.zeros((256, 512), np.float32)
    traced(scaled_ragged_tiles, rows, limit=2 * 256, bound=5, shift=3)  # i_p - 3 >= -0.5, so row 0
    error = rejected(scaled_ragged_tiles, rows, limit=2 * 256, bound=4, shift=3)  # i_p - 3 >= -1: one before
    assert rules(error) == ["out-of-bounds"]
    assert "goes below 0" in error.diagnostics[0].message


# --- affine-dependence ----------------------------------------------------------------------------------------------


def test_a_one_iteration_affine_loop_carries_nothing(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for _ in nl.affine_range(1):
            t[...] = nl.add(t, nl.load(a))  # read and written in every iteration: fine when there is one
        nl.store(out, value=t)
        return out

    traced(kernel, A)


def test_two_iterations_of_the_same_loop_carry_a_value(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for _ in nl.affine_range(2):
            t[...] = nl.add(t, nl.load(a))
        nl.store(out, value=t)
        return out

    assert rules(rejected(kernel, A)) == ["affine-dependence"]


def test_reading_a_wider_window_than_the_iteration_writes_is_rejected(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 640), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(3):
            t[:, i * 128:i * 128 + 128] = nl.load(a[:, i * 128:i * 128 + 128])
            wide = nl.copy(t[:, i * 128:i * 128 + 256])  # also reads what iteration i + 1 writes
            nl.store(out[:, i * 128:i * 128 + 256], value=wide)
        return out

    error = rejected(kernel, A)
    assert "affine-dependence" in rules(error)
    (diag,) = [d for d in error.diagnostics if d.rule == "affine-dependence"]
    assert "one iteration reads what another writes" in diag.message


# --- scope and output-written ---------------------------------------------------------------------------------------


def test_a_tile_read_twice_after_its_loop_is_reported_once(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2):
            last = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, value=nl.add(last, last))
        return out

    error = rejected(kernel, np.zeros((256, 512), np.float32))
    assert rules(error) == ["scope"]


def test_a_write_through_a_reshape_of_a_reshape_counts(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((32, 2048), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out.reshape((64, 1024)).reshape((128, 512)), value=nl.load(a))
        return out

    traced(kernel, A)


# --- out-of-bounds: masks of transposes -----------------------------------------------------------------------------


@nki.jit
def masked_transposes(a, form, rows):
    """Transpose the first ``rows`` rows of a 128-row window; the mask is written over the source's axes."""
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    j_p, j_f = nl.arange(64)[:, None], nl.arange(128)[None, :]
    if form == "load_transpose2d":
        t = nl.load_transpose2d(a[i_p, i_f], mask=(i_p < rows))
    else:
        s = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        s[...] = nl.load(a)
        t = nl.transpose(s[i_p, i_f], mask=(i_p < rows))
    nl.store(out[j_p, j_f], value=t, mask=(j_f < rows))
    return out


@pytest.mark.parametrize("form", ["load_transpose2d", "transpose"])
def test_a_transpose_masked_to_the_rows_that_exist_is_in_bounds(form, traced, rejected):
    a = np.zeros((100, 64), np.float32)
    traced(masked_transposes, a, form=form, rows=100)
    error = rejected(masked_transposes, a, form=form, rows=101)
    assert "out-of-bounds" in rules(error)
    assert "index range [0, 100] exceeds dimension size of 100" in error.diagnostics[0].message
