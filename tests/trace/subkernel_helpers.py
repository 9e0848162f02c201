"""A sub-kernel defined in another file than the kernels calling it (tests/trace/test_subkernels.py)."""

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit(mode="trace")
def rms_scale(tile, eps):
    """``tile / sqrt(mean(tile^2) + eps)`` along the free axis, on an SBUF tile."""
    mean_sq = nl.mean(nl.square(tile), axis=1, keepdims=True)
    return nl.multiply(tile, nl.rsqrt(nl.add(mean_sq, eps)))
