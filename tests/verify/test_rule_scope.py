import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

ROWS_256 = np.zeros((256, 512), np.float32)


@nki.jit
def sum_by_rebinding(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        total = total + x  # rebinds the name to a new tile; the body is traced once
    nl.store(out, value=total)
    return out


def test_golden_tile_rebound_in_a_loop_and_read_after_it(golden, rejected):
    golden("scope", rejected(sum_by_rebinding, ROWS_256))


def test_sequential_loops_have_the_same_rule(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.sequential_range(2):
            last = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, value=last)
        return out

    (diag,) = rejected(kernel, ROWS_256).diagnostics
    assert diag.rule == "scope" and diag.op == "nl.store"
    assert diag.message.startswith(
        f"operand 'value' reads tile %1[128, 512] in 'sbuf' after the sequential_range loop at line "
        f"{diag.loc.line - 2} that made it (line {diag.loc.line - 1})"
    )


def test_writing_into_a_tensor_declared_before_the_loop_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        total = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            total[...] += nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out, value=total)
        return out

    traced(kernel, ROWS_256)


def test_a_tile_used_in_a_nested_loop_of_its_own_loop_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            x = nl.load(a[i * 128:(i + 1) * 128, :])
            for j in nl.affine_range(4):
                nl.store(out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128], value=x[:, j * 128:(j + 1) * 128])
        return out

    traced(kernel, ROWS_256)


def test_an_output_declared_inside_a_loop_is_rejected(rejected):
    @nki.jit
    def kernel(a):
        for _ in nl.affine_range(1):
            out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.load(a[0:128, :]))
        return out

    diags = rejected(kernel, ROWS_256).diagnostics
    assert [d.rule for d in diags] == ["scope"]
    assert diags[0].message == (
        f"output %0 f32[128, 512] in 'shared_hbm' is declared inside the affine_range loop at line "
        f"{diags[0].loc.line - 1}; declare kernel outputs before any loop"
    )
