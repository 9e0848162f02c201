"""Inputs, expected values and comparisons for the nisa tests.

Expected values are computed by the tests' own NumPy formulas in fp32 (float64 where a formula needs it) from the
exact input values, then rounded once to the output dtype, as the engines do.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
FLOAT_DTYPES = [np.dtype(F32), BF16, F16]
# Relative tolerance per output dtype: a few fp32 ulps, or one ulp of the narrow type (the formula computed in
# another order may round to the neighbouring value).
RTOL = {np.dtype(F32): 2e-6, BF16: 2**-7, F16: 2**-10}


def rand(shape, dtype=F32, lo=-1.0, hi=1.0, seed=0) -> np.ndarray:
    """Uniform values in [lo, hi), representable in ``dtype``."""
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, size=shape).astype(F32).astype(dtype)


def f32(a) -> np.ndarray:
    return np.asarray(a, dtype=F32)


def rounded(value, dtype) -> np.ndarray:
    """``value`` (fp32/fp64) rounded once to ``dtype``, as fp32 for comparison."""
    return np.asarray(value, dtype=F32).astype(dtype).astype(F32)


def assert_close(got, expected, dtype=F32, rtol=None, atol=None):
    dtype = np.dtype(dtype)
    got = np.asarray(got)
    assert got.dtype == dtype, f"output dtype {got.dtype}, expected {dtype}"
    rtol = RTOL[dtype] if rtol is None else rtol
    atol = rtol if atol is None else atol
    np.testing.assert_allclose(f32(got), rounded(expected, dtype), rtol=rtol, atol=atol)


def run_tiles(body, a, b=None, c=None):
    """Run a kernel that loads each given input into SBUF, applies ``body`` to the tiles and stores the tile (or
    tuple of tiles) it returns; returns the output array(s)."""
    import nki_dsl as nki
    import nki_dsl.language as nl

    @nki.jit
    def kernel(x, y, z):
        res = body(*[nl.load(t) for t in (x, y, z) if t is not None])
        outs = []
        for r in res if isinstance(res, tuple) else (res,):
            out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
            nl.store(out, r)
            outs.append(out)
        return tuple(outs) if isinstance(res, tuple) else outs[0]

    return kernel(a, b, c)
