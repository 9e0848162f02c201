"""Kernels the profiling tests simulate: a tiled matmul (Tensor engine, PSUM accumulation) and a tiled
elementwise add whose size is a parameter (HBM-bound; huge shapes in timing-only mode)."""

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def matmul(lhsT, rhs):
    """``lhsT.T @ rhs`` in [128, 128] x [128, 512] tiles, accumulated over K in PSUM."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                b = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=nl.copy(acc, dtype=result.dtype))
    return result


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
