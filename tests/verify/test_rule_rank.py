import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.parser import parse_kernel

A = np.zeros((128, 512), np.float32)


@nki.jit
def one_dimensional_sbuf_tensor(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    scale = nl.zeros((128,), dtype=nl.float32, buffer=nl.sbuf)  # no free dimension
    nl.store(out, value=nl.multiply(nl.load(a), scale))
    return out


def test_golden_on_chip_tensor_without_a_free_dimension(golden, rejected):
    golden("rank", rejected(one_dimensional_sbuf_tensor, A))


def test_partition_plus_four_free_dimensions_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 2, 2, 2, 64), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(out[:, 0:64], value=t[:, 0, 0, 0, :])
        return out

    traced(kernel, A)


def test_five_free_dimensions_are_rejected(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 2, 2, 2, 2, 32), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(out[:, 0:32], value=t[:, 0, 0, 0, 0, :])
        return out

    (diag,) = rejected(kernel, A).diagnostics
    assert (diag.rule, diag.op) == ("rank", "nl.full")
    assert diag.message == (
        "tensor %1 f32[128, 2, 2, 2, 2, 32] in 'sbuf' has rank 6: an on-chip tile has at most 4 free dimensions"
    )


TRANSPOSE_3D = """\
kernel k(%a: f32[128, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 128] shared_hbm loc(3)
  %1 = nl.full() {value = 0.0} : f32[64, 32, 2] sbuf loc(4)
  %2 = nl.transpose(x=%1) : f32[32, 64] sbuf loc(5)
  nl.store(dst=%0[d0, d1 ; 32x64], value=%2) loc(6)
}
"""


def test_transpose_of_a_3d_tile_in_parsed_ir_is_rejected(reverified):
    # The tracer refuses to build this transpose; IR text from a Hub bundle can still say it.
    (diag,) = reverified(parse_kernel(TRANSPOSE_3D)).diagnostics
    assert diag.rule == "rank"
    assert str(diag) == (
        "k.py:5: nl.transpose: operand 'x' %1[64, 32, 2] in 'sbuf' has 3 dimensions; nl.transpose transposes 2-D "
        "tiles only"
    )


ONE_DIMENSIONAL_READ = """\
kernel k(%a: f32[128, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %1 = nl.full() {value = 0.0} : f32[128, 512] sbuf loc(4)
  nl.store(dst=%0[d0, 0 ; 128], value=%1[d0, 0 ; 128]) loc(5)
}
"""


def test_a_one_dimensional_read_of_a_two_dimensional_tile_in_parsed_ir_is_rejected(reverified):
    # The tile is well formed; the access drops its free dimension (the tracer keeps it, IR text need not).
    (diag,) = reverified(parse_kernel(ONE_DIMENSIONAL_READ)).diagnostics
    assert str(diag) == (
        "k.py:5: nl.store: operand 'value' %1[128] in 'sbuf' has insufficient rank 1: on-chip tiles are at least "
        "2-D (partition dimension first); keep a size-1 dimension, e.g. keepdims=True or [0:1, :]"
    )
