import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.parser import parse_kernel

A = np.zeros((128, 512), np.float32)


@nki.jit
def assign_wider_tile(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    half = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
    half[...] = nl.load(a)  # 512 columns into 256
    nl.store(out[:, 0:256], value=half)
    return out


def test_golden_assigned_value_does_not_fit(golden, rejected):
    golden("shape", rejected(assign_wider_tile, A))


def test_size_one_dimensions_broadcast_into_the_destination(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        t[...] = nl.load(a[:, 0:1])
        nl.store(out, value=t)
        return out

    traced(kernel, A)


WRONG_RESULT_SHAPE = """\
kernel k(%a: f32[128, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %1 = nl.load(src=%a) : f32[128, 512] sbuf loc(4)
  %2 = nl.exp(x=%1) : f32[128, 256] sbuf loc(5)
  nl.store(dst=%0[d0, d1 ; 128x256], value=%2) loc(6)
}
"""


def test_parsed_ir_cannot_declare_a_result_shape_the_op_does_not_give(reverified):
    (diag,) = reverified(parse_kernel(WRONG_RESULT_SHAPE)).diagnostics
    assert diag.rule == "shape"
    assert str(diag) == (
        "k.py:5: nl.exp: result %2 f32[128, 256] in 'sbuf' does not have the shape [128, 512] that nl.exp gives "
        "for its operands ('x' [128, 512])"
    )


RESHAPE_LOSES_ELEMENTS = """\
kernel k(%a: f32[128, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %1 = hbm.reshape(x=%a) {shape = (128, 256)} : f32[128, 256] hbm loc(4)
  %2 = nl.load(src=%1) : f32[128, 256] sbuf loc(5)
  nl.store(dst=%0[d0, d1 ; 128x256], value=%2) loc(6)
}
"""


def test_a_reshape_keeps_every_element(reverified):
    (diag,) = reverified(parse_kernel(RESHAPE_LOSES_ELEMENTS)).diagnostics
    assert diag.rule == "shape"
    assert str(diag) == (
        "k.py:4: hbm.reshape: result %1 f32[128, 256] in 'hbm' has 32768 elements but operand 'x' "
        "%a f32[128, 512] in 'hbm' has 65536; a reshape keeps every element"
    )
