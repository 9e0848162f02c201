import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

ROWS_256 = np.zeros((256, 512), np.float32)


@nki.jit
def three_tiles_of_256_rows(a):
    out = nl.ndarray((384, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        x = nl.load(a[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])  # i = 2 reads rows 256..383
        nl.store(out[i * 128:(i + 1) * 128, :], value=x)
    return out


def test_golden_overrun_through_a_loop_index_names_the_loop(golden, rejected):
    golden("out-of-bounds", rejected(three_tiles_of_256_rows, ROWS_256))


def test_two_tiles_of_256_rows_are_in_bounds(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            x = nl.load(a[i * 128 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
            nl.store(out[i * 128:(i + 1) * 128, :], value=x)
        return out

    traced(kernel, ROWS_256)


def test_a_mask_on_the_ragged_tile_makes_the_overrun_valid(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((300, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            i_p = i * 128 + nl.arange(128)[:, None]
            x = nl.load(a[i_p, nl.arange(512)[None, :]], mask=(i_p < 300))
            nl.store(out[i_p, nl.arange(512)[None, :]], value=x, mask=(i_p < 300))
        return out

    traced(kernel, np.zeros((300, 512), np.float32))


def test_a_free_axis_overrun_names_the_dimension_and_no_loop(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a[nl.arange(128)[:, None], nl.arange(512)[None, :] + 8])
        nl.store(out, value=x)
        return out

    (diag,) = rejected(kernel, np.zeros((128, 512), np.float32)).diagnostics
    assert diag.rule == "out-of-bounds"
    assert diag.message == (
        "out-of-bound access for tensor %a f32[128, 512] on dimension 1: index range [8, 519] exceeds dimension "
        "size of 512; the index is d1 + 8 (operand 'src' %a[128, 512] in 'hbm'); restrict the op to the valid "
        "elements with mask="
    )


def test_a_program_id_overrun_names_the_launch_grid(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a[nl.program_id(0) * 64 + nl.arange(128)[:, None], nl.arange(512)[None, :]])
        nl.store(out, value=x)
        return out

    (diag,) = rejected(kernel[2], ROWS_256[0:128]).diagnostics
    assert "index range [0, 191] exceeds dimension size of 128" in diag.message
    assert "with pid0 in [0, 1] from the launch grid" in diag.message


def _blocks_under_a_two_variable_mask(rows: int):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((rows, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for g in nl.affine_range(2):
            for i in nl.affine_range(4):  # 8 blocks of 128 rows, interleaved over g; the mask keeps whole blocks
                i_p = (2 * i + g) * 128 + nl.arange(128)[:, None]
                x = nl.load(a[i_p, nl.arange(512)[None, :]], mask=((2 * i + g) * 128 < rows))
                nl.store(out[i_p, nl.arange(512)[None, :]], value=x, mask=((2 * i + g) * 128 < rows))
        return out

    return kernel


def test_a_mask_over_two_loop_variables_bounds_the_index_it_constrains(traced):
    a = np.arange(768 * 512, dtype=np.float32).reshape(768, 512)
    kernel = _blocks_under_a_two_variable_mask(768)
    traced(kernel, a)
    assert np.array_equal(kernel(a), a)


def test_a_two_variable_mask_that_lets_a_ragged_block_through_is_refused_with_the_exact_range(rejected):
    # Blocks starting below 700 pass the mask; the one starting at 640 runs to row 767.
    diags = rejected(_blocks_under_a_two_variable_mask(700), np.zeros((700, 512), np.float32)).diagnostics
    assert {d.rule for d in diags} == {"out-of-bounds"}
    assert "index range [0, 767] exceeds dimension size of 700" in diags[0].message


@nki.jit
def stepped_row_tiles(a, row_mask: bool):
    """Rows r..r+127 for r = 0, 128, 256 of a 300-row tensor: a loop with step 128, not an index scaled by 128."""
    out = nl.ndarray((300, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(0, 384, 128):
        i_p = r + nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        keep = (i_p < 300) if row_mask else (i_f < 500)  # a mask on the free axis leaves rows 300..383 read
        x = nl.load(a[i_p, i_f], mask=keep)
        nl.store(out[i_p, i_f], value=x, mask=(i_p < 300))
    return out


def test_a_masked_access_in_a_stepped_loop_is_bounded_at_its_last_step(rejected):
    (diag, *_) = rejected(stepped_row_tiles, np.zeros((300, 512), np.float32), False).diagnostics
    assert diag.rule == "out-of-bounds"
    assert "on dimension 0: index range [0, 383]" in diag.message


def test_a_row_mask_in_a_stepped_loop_keeps_the_last_step_in_bounds(traced):
    traced(stepped_row_tiles, np.zeros((300, 512), np.float32), True)


@nki.jit
def rows_under_a_mask_of_every_variable(a):
    """Program p reads rows 64p + r of a 128-row tensor for the r (< 128) with r + 32p + c <= 63, c the column: the
    mask names the program id and both tile axes, and keeps program 1 at rows 64..95."""
    out = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(4)[None, :]
    x = nl.load(a[pid * 64 + i_p, i_f], mask=(i_p + 32 * pid + i_f < 64))
    nl.store(out[pid * 64 + i_p, i_f], value=x, mask=(i_p + 32 * pid + i_f < 64))
    return out


def test_a_mask_over_every_variable_of_an_access_bounds_its_index(traced):
    # unmasked, the rows run to 64 + 127 = 191; the mask, a constraint on all of pid0, d0 and d1, is the only
    # thing keeping them inside 128
    traced(rows_under_a_mask_of_every_variable[2], np.zeros((128, 4), np.float32))
