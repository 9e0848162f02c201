"""RMSNorm written with ``nl`` operators only (square, mean, rsqrt, two products), for row counts that are a multiple
of 128: no mask. The reference benchmarks time it (``benchmarks/numpy_ref_speed.py``) and the speed-invariance golden
pins its modelled schedule, so it keeps this form beside ``kernel.py``'s (one ``nl.rms_norm``, masked ragged tile)."""

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def rmsnorm_rows(x, weight, eps=1e-6):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(cols)[None, :]
    w = nl.load(weight.reshape((1, cols))[nl.arange(1)[:, None], i_f])
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f])
        inv_rms = nl.rsqrt(nl.mean(nl.square(tile), axis=1, keepdims=True) + eps)
        nl.store(out[i_p, i_f], value=tile * inv_rms * w.broadcast_to((128, cols)))
    return out
