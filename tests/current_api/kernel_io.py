"""The two moves every small current-API test kernel makes: an HBM input into an SBUF tile, and a tile out to a
fresh shared-HBM output; the index tile of a vector_offset access; running on a named backend."""

import numpy as np

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl


def sbuf(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def out(t):
    result = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=result, src=t)
    return result


def indices(idx):
    """An HBM column of row indices as the [P, 1] SBUF tile a vector_offset access takes."""
    ix = nl.ndarray((idx.shape[0], 1), idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ix, src=idx)
    return ix


def run_on(kernel, backend: str, *args):
    """A current-API kernel's outputs on ``backend`` (numpy, jax, or the simulator through nki.simulate)."""
    if backend == "simulator":
        return nki.simulate(kernel)(*args)
    return np.asarray(kernel(*args, backend=backend))
