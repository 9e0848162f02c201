"""MoE gating, NKI 0.6 API: top-k experts per token with max8 + nc_find_index8, softmax over the k kept logits,
and a dispatch that scatters each token's hidden row to its first expert's slot.

logits: [T, E] fp32 (8 <= E <= 512), x: [T, H]; T a multiple of 128, k <= 8.
Outputs: expert ids [T, k] int32 (best first), gates [T, k] fp32, and dispatched [E * T, H] where row e * T + t holds
x[t] if e is token t's top expert and zero otherwise (capacity T per expert, so no token is ever dropped).
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def topk_router(logits, x, top_k):
    T, E = logits.shape
    H = x.shape[1]
    P = nl.tile_size.pmax
    assert 1 <= top_k <= 8, "max8 yields 8 candidates per row"

    expert_ids = nl.ndarray((T, top_k), dtype=nl.int32, buffer=nl.shared_hbm)
    gates = nl.ndarray((T, top_k), dtype=nl.float32, buffer=nl.shared_hbm)
    dispatched = nl.ndarray((E * T, H), dtype=x.dtype, buffer=nl.shared_hbm)

    # zero the dispatch buffer before any token lands in it
    zeros = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    fills = []
    for r in nl.affine_range(E * T // P):
        fills.append(nisa.dma_copy(dst=dispatched[nl.ds(r * P, P), :], src=zeros))

    for t in nl.affine_range(T // P):
        lg = nl.ndarray((P, E), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lg, src=logits[nl.ds(t * P, P), :])

        top8 = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top8, src=lg)
        idx8 = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx8, data=lg, vals=top8)

        ids = nl.ndarray((P, top_k), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=ids, src=idx8[:, 0:top_k])
        nisa.dma_copy(dst=expert_ids[nl.ds(t * P, P), :], src=ids)

        # softmax over the kept logits; top8[:, 0] is the row maximum
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=neg_max, data=top8[:, 0:1], op0=nl.multiply, operand0=-1.0)
        e = nl.ndarray((P, top_k), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=top8[:, 0:top_k], bias=neg_max, reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        g = nl.ndarray((P, top_k), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=g, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=gates[nl.ds(t * P, P), :], src=g)

        # destination row of each token: top1 * T + (t * P + partition)
        token = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=token, pattern=[[0, 1]], offset=t * P, channel_multiplier=1)
        dest = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=dest, data=ids[:, 0:1], op0=nl.multiply, operand0=T, op1=nl.add,
                                  operand1=token)
        rows = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=x[nl.ds(t * P, P), :])
        scatter = nisa.dma_copy(dst=dispatched.ap(pattern=[[H, P], [1, H]], offset=0, vector_offset=dest,
                                                  indirect_dim=0), src=rows, dge_mode=nisa.dge_mode.swdge)
        scatter.depends_on(*fills)  # the scatter's rows are data-dependent: order it after every zero fill
    return expert_ids, gates, dispatched
