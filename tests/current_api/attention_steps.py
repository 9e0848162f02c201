"""The two Tensor-engine steps of one head's decode attention, shared by the token-generation kernels of
test_token_gen_attention.py (heads split across cores) and test_lnc_collectives.py (the KV cache split across
cores): the scores of a query column against cached keys, and the probabilities' weighted sum of cached values.
Plain helpers called while a kernel traces: their instructions land in the calling kernel."""

import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl


def _transposed(t, rows: int, cols: int):
    """A fresh [cols, rows] SBUF tile: ``t`` [rows, cols] (SBUF) transposed on the Tensor engine through PSUM."""
    t_psum = nl.ndarray((cols, rows), nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=t_psum, data=t)
    tT = nl.ndarray((cols, rows), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=tT, src=t_psum)
    return tT


def scores(q_col, k_rows, n: int, D: int, dtype=nl.float32):
    """s [1, n] in PSUM: query column ``q_col`` [D, 1] (SBUF) times the keys ``k_rows`` [n, D] (HBM, read as
    ``dtype``) transposed to [D, n]."""
    k = nl.ndarray((n, D), dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=k, src=k_rows)
    s = nl.ndarray((1, n), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=s, stationary=q_col, moving=_transposed(k, n, D))
    return s


def weighted_values(p, v_rows, n: int, D: int):
    """o [1, D] in PSUM: the probabilities ``p`` [1, n] (SBUF) times the values ``v_rows`` [n, D] (HBM). The Tensor
    engine contracts over partitions, so p goes in as [n, 1]."""
    v = nl.ndarray((n, D), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=v_rows)
    o = nl.ndarray((1, D), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=o, stationary=_transposed(p, 1, n), moving=v)
    return o
