"""A kernel the profiling tests simulate beside the library's tiled matmul (``kernels/matmul``): a tiled
elementwise add whose size is a parameter (HBM-bound; huge shapes in timing-only mode)."""

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def add(a, b):
    """``a + b`` for [R, F] inputs in [128, F] row tiles; one launch-grid instance per ``R / grid`` rows."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    base = nl.program_id(0) * rows
    for t in nl.affine_range(rows // 128):
        lo = base + t * 128
        nl.store(out[lo:lo + 128, :], value=nl.load(a[lo:lo + 128, :]) + nl.load(b[lo:lo + 128, :]))
    return out
