import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

ROWS_256 = np.zeros((256, 512), np.float32)


@nki.jit
def running_sum_in_place(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf, name="total")
    for i in nl.affine_range(2):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        total[...] = total + x  # reads the previous iteration's total: needs += or sequential_range
    nl.store(out, value=total)
    return out


def test_golden_read_after_write_across_iterations(golden, rejected):
    golden("affine-dependence", rejected(running_sum_in_place, ROWS_256))


def test_the_same_update_in_a_sequential_range_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(2):
            total[...] = total + nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, value=total)
        return out

    traced(kernel, ROWS_256)


def test_sbuf_plus_equals_is_an_accepted_reduction(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            total[...] += nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, value=total)
        return out

    traced(kernel, ROWS_256)


def test_psum_matmul_accumulation_is_accepted(traced):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(4):
            acc += nl.matmul(nl.load(a[k * 128:(k + 1) * 128, :]), nl.load(b[k * 128:(k + 1) * 128, :]),
                             transpose_x=True)  # fmt: skip
        nl.store(out, value=nl.copy(acc))
        return out

    traced(kernel, np.zeros((512, 128), np.float32), np.zeros((512, 512), np.float32))


def test_each_iteration_writing_its_own_tile_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 2, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            buf[:, i, :] = nl.load(a[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=buf[:, i, :])
        return out

    traced(kernel, ROWS_256)


def test_every_iteration_storing_to_the_same_rows_is_a_race(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            nl.store(out, value=nl.load(a[i * 128:(i + 1) * 128, :]))
        return out

    (diag,) = rejected(kernel, ROWS_256).diagnostics
    assert diag.rule == "affine-dependence" and diag.op == "nl.store"
    assert diag.message == (
        "operand 'dst' %0[128, 512] in 'shared_hbm' writes the same elements in every iteration of affine_range "
        f"loop i0 (line {diag.loc.line - 1}), so the result depends on which iteration runs last; index the write "
        "with i0, store once after the loop, or use nl.sequential_range"
    )


def test_reading_a_tile_another_iteration_writes_is_rejected(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 3, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            buf[:, i + 1, :] = nl.add(buf[:, i, :], nl.load(a[i * 128:(i + 1) * 128, :]))  # a prefix sum
        nl.store(out, value=buf[:, 2, :])
        return out

    (diag,) = rejected(kernel, ROWS_256).diagnostics
    assert diag.rule == "affine-dependence" and diag.op == "assign"
    assert diag.message == (
        f"operand 'dst' %1[128, 512] in 'sbuf' writes at [d0, i0 + 1, d1] while line {diag.loc.line} reads %1 at "
        f"[d0, i0, d1] in the same affine_range loop i0 (line {diag.loc.line - 1}): one iteration reads what "
        "another writes; use nl.sequential_range"
    )


def test_reading_an_accumulator_inside_its_loop_is_rejected(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            total[...] += nl.load(a[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=total)  # a partial sum: depends on the order
        return out

    (diag,) = rejected(kernel, ROWS_256).diagnostics
    assert diag.rule == "affine-dependence" and diag.op == "nl.store"
    assert "the partial sum depends on the iteration order" in diag.message


# Dependence is decided on the index maps (verify/iteration_overlap.py): can two different iterations of the affine
# loop touch one element? Textually different indices may be disjoint, textually equal ones may overlap.

BLOCKS = np.arange(2 * 128 * 512, dtype=np.float32).reshape(2, 128, 512)


def test_different_tilings_of_one_iterations_block_are_accepted_and_run(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((2, 128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 2, 512), dtype=nl.float32, buffer=nl.sbuf)
        for g in nl.affine_range(2):
            for j in nl.affine_range(2):
                buf[:, g, nl.ds(256 * j, 256)] = nl.load(a[g, :, nl.ds(256 * j, 256)])
            for m in nl.affine_range(4):  # reads block g at another tiling: never what iteration g' != g writes
                nl.store(out[g, :, nl.ds(128 * m, 128)], value=buf[:, g, nl.ds(128 * m, 128)])
        return out

    traced(kernel, BLOCKS)
    assert np.array_equal(kernel(BLOCKS), BLOCKS)


def test_reading_an_accumulator_after_its_inner_loop_in_an_outer_loop_that_indexes_it_is_accepted(traced):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((2, 128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 2, 256), nl.float32, buffer=nl.psum)  # both blocks in one 2 KiB bank
        for g in nl.affine_range(2):
            for k in nl.affine_range(2):
                acc[:, g, :] += nl.matmul(nl.load(a[g, nl.ds(128 * k, 128), :]),
                                          nl.load(b[g, nl.ds(128 * k, 128), :]), transpose_x=True)  # fmt: skip
            nl.store(out[g], value=nl.copy(acc[:, g, :]))  # this iteration's own sum, complete
        return out

    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 256, 128)).astype(np.float32)
    b = rng.standard_normal((2, 256, 256)).astype(np.float32)
    traced(kernel, a, b)
    want = np.einsum("gkm,gkn->gmn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(kernel(a, b), want, rtol=1e-4, atol=1e-3)


def test_a_read_of_what_the_neighbouring_iteration_writes_is_rejected_even_at_the_same_index(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((128, 640), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):  # windows of 256 columns, 128 apart: iteration i + 1 overwrites half of i's
            buf[:, nl.ds(128 * i, 256)] = nl.exp(buf[:, nl.ds(128 * i, 256)])
        nl.store(out, value=buf[:, 0:512])
        return out

    (diag,) = rejected(kernel, ROWS_256[:128]).diagnostics
    assert diag.rule == "affine-dependence" and "one iteration reads what another writes" in diag.message
