"""LayerNorm written with ``nl`` operators only (two means, rsqrt, scale and shift), for row counts that are a
multiple of 128: no mask. The reference benchmarks time it (``benchmarks/numpy_ref_speed.py``) and the
speed-invariance golden pins its modelled schedule (about 3x slower than ``kernel.py``'s bn_stats / Scalar-engine
form, which is the one the package ships as its entry point), so it keeps this form beside that one."""

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def layernorm_rows(x, gamma, beta, eps=1e-5):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    i_one = nl.arange(1)[:, None]
    g = nl.load(gamma.reshape((1, cols))[i_one, i_f])
    b = nl.load(beta.reshape((1, cols))[i_one, i_f])
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f])
        mean = nl.mean(tile, axis=1, keepdims=True)
        centered = tile - mean
        var = nl.mean(nl.square(centered), axis=1, keepdims=True)
        nl.store(out[i_p, i_f], value=centered * nl.rsqrt(var + eps) * g + b)
    return out
