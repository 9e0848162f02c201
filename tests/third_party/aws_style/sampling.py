"""Greedy / Gumbel-max token sampling over a vocabulary, in both API generations.

logits: [B, V] fp32, noise: [B, V] fp32 Gumbel noise (0 for greedy), temperature t:
token[b] = argmax_v(logits[b, v] / t + noise[b, v]).

* `sample_tokens` (NKI 0.6) runs on one or two NeuronCores (`kernel[2]`): core `nl.program_id(0)` takes every other
  128-row tile; the argmax is max8 + nc_find_index8 over the whole row (V <= 16384).
* `sample_partials_legacy` (neuronxcc.nki) runs on a 2-D SPMD grid [B/128, n_shards]: program (i, s) scores rows
  i*128.. over vocabulary shard s and writes the shard's best value and index; the caller reduces the shards.
"""

import neuronxcc.nki.isa as lnisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
from neuronxcc import nki as legacy_nki


@nki.jit
def sample_tokens(logits, noise, temperature):
    B, V = logits.shape
    P = nl.tile_size.pmax
    tokens = nl.ndarray((B, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    cores = nl.num_programs(0)
    core = nl.program_id(0)
    n_tiles = B // P
    for j in nl.affine_range(n_tiles // cores):
        r0 = (j * cores + core) * P
        lg = nl.ndarray((P, V), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lg, src=logits[nl.ds(r0, P), :])
        nz = nl.ndarray((P, V), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=nz, src=noise[nl.ds(r0, P), :])
        score = nl.ndarray((P, V), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=score, data=lg, op0=nl.multiply, operand0=1.0 / temperature, op1=nl.add,
                                  operand1=nz)
        best = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=best, src=score)
        where = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=where, data=score, vals=best)
        tok = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=tok, src=where[:, 0:1])
        nisa.dma_copy(dst=tokens[nl.ds(r0, P), :], src=tok)
    return tokens


@legacy_nki.jit
def sample_partials_legacy(logits, noise, temperature):
    B, V = logits.shape
    n_shards = lnl.num_programs(1)
    VS = V // n_shards
    best_val = lnl.ndarray((n_shards, B, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
    best_idx = lnl.ndarray((n_shards, B, 1), dtype=lnl.float32, buffer=lnl.shared_hbm)
    i = lnl.program_id(0)
    s = lnl.program_id(1)
    i_p = i * 128 + lnl.arange(128)[:, None]
    i_v = s * VS + lnl.arange(VS)[None, :]
    score = lnl.load(logits[i_p, i_v]) * (1.0 / temperature) + lnl.load(noise[i_p, i_v])
    mx = lnl.max(score, axis=1, keepdims=True)
    col = lnisa.iota(s * VS + lnl.arange(VS)[None, :], dtype=lnl.float32)
    # the first column reaching the maximum: the smallest index where score == max
    first = lnl.min(lnl.where(score == mx, col, float(V)), axis=1, keepdims=True)
    i_0 = lnl.arange(1)[None, :]
    lnl.store(best_val[s, i_p, i_0], value=mx)
    lnl.store(best_idx[s, i_p, i_0], value=first)
    return best_val, best_idx
