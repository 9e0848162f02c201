"""``TracedKernel.param_types``: what a caller binding arrays from elsewhere (a Hub manifest's record) checks them
against, so dtypes are NumPy's names of the arrays a parameter takes, not the IR's (``f8e4m3`` takes
``float8_e4m3fn`` arrays, ``bool`` ``bool`` ones)."""

import numpy as np

import nki_dsl as nki

TEXT = """kernel k(%x: f8e4m3[128, 4] hbm, %b: bool[128, 4] hbm, %s: f32[1] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f8e4m3[128, 4] shared_hbm loc(1)
  %1 = nl.load(src=%x[d0, d1 ; 128x4]) : f8e4m3[128, 4] sbuf loc(2)
  nl.store(dst=%0[d0, d1 ; 128x4], value=%1) loc(3)
}
"""


def test_param_types_name_the_numpy_dtypes_of_the_arrays_a_kernel_takes():
    kernel = nki.parse_ir(TEXT)
    assert kernel.param_types == [("x", (128, 4), "float8_e4m3fn"), ("b", (128, 4), "bool"), ("s", (1,), "float32")]
    x = np.zeros((128, 4), nki.language.float8_e4m3)
    assert np.dtype(x.dtype).name == kernel.param_types[0][2]
