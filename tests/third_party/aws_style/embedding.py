"""Token embedding lookup with indirect DMA (a gather of table rows by token id), in both API generations.

ids: [T, 1] int32, table: [V, H], pos: [T, H] -> out [T, H] = table[ids] * scale + pos.
"""

import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
from neuronxcc import nki as legacy_nki


@nki.jit
def embed(ids, table, pos, scale=1.0):
    T = ids.shape[0]
    V, H = table.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((T, H), dtype=table.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range((T + P - 1) // P):
        rows = min(P, T - t * P)
        idx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx[0:rows, :], src=ids[nl.ds(t * P, rows), :])
        emb = nl.ndarray((P, H), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=emb[0:rows, :],
                      src=table.ap(pattern=[[H, rows], [1, H]], offset=0, vector_offset=idx[0:rows, :],
                                   indirect_dim=0),
                      dge_mode=nisa.dge_mode.swdge, oob_mode=nisa.oob_mode.error)
        p_sb = nl.ndarray((P, H), dtype=pos.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=p_sb[0:rows, :], src=pos[nl.ds(t * P, rows), :])
        res = nl.ndarray((P, H), dtype=table.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=res[0:rows, :], data=emb[0:rows, :], op0=nl.multiply, operand0=scale,
                                  op1=nl.add, operand1=p_sb[0:rows, :])
        nisa.dma_copy(dst=out[nl.ds(t * P, rows), :], src=res[0:rows, :])
    return out


@legacy_nki.jit
def embed_legacy(ids, table, pos, scale=1.0):
    T = ids.shape[0]
    V, H = table.shape
    out = lnl.ndarray((T, H), dtype=table.dtype, buffer=lnl.shared_hbm)
    i_f = lnl.arange(H)[None, :]
    for t in lnl.affine_range((T + 127) // 128):
        i_p = t * 128 + lnl.arange(128)[:, None]
        idx = lnl.load(ids[i_p, 0], mask=(i_p < T))
        emb = lnl.load(table[idx, i_f], mask=(i_p < T))
        p = lnl.load(pos[i_p, i_f], mask=(i_p < T))
        lnl.store(out[i_p, i_f], value=emb * scale + p, mask=(i_p < T))
    return out
