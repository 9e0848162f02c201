"""The two moves every small current-API test kernel makes: an HBM input into an SBUF tile, and a tile out to a
fresh shared-HBM output."""

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
