"""The selective scan of a Mamba layer, in the style of the legacy NKI fused-Mamba tutorial. Channels run on
partitions; for each state ``n`` the recurrence ``h[t] = exp(delta[t] * A[c, n]) * h[t-1] + delta[t] * u[t] *
B[n, t]`` is one ``nisa.tensor_tensor_scan``, and ``y[t] = sum_n C[n, t] * h[t]`` accumulates over states.

Shapes: ``delta``, ``u`` ``[batch, channels, seq]``; ``A`` ``[channels, state]``; ``B``, ``C`` ``[batch, state,
seq]``; the result ``[batch, channels, seq]``.

* ``mamba_v1``: the tutorial's first version (batch, state, channel-tile loops; SBUF accumulator with ``+=``).
* ``mamba_v2``: channel tiles outermost so ``delta`` and ``u`` load once per tile, and the sequence split into
  chunks scanned in a ``sequential_range`` that carries the last state of each chunk into the next as the
  scan's ``initial`` value (the tutorial's long-sequence version).
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def mamba_v1(delta, u, A, B, C):
    batch_size, channels, seq_len = delta.shape
    output = nl.ndarray((batch_size, channels, seq_len), dtype=delta.dtype, buffer=nl.shared_hbm)
    _, state_size = A.shape
    assert channels % 128 == 0

    channel_psize = nl.tile_size.pmax
    n_channel_tile = channels // channel_psize

    for i_batch in nl.affine_range(batch_size):
        # The sum over states, one [128, seq] tile per channel tile.
        scanC_accum = nl.zeros((n_channel_tile, nl.par_dim(channel_psize), seq_len), dtype=delta.dtype)

        for i_state in nl.affine_range(state_size):
            for i_channel_tile in nl.affine_range(n_channel_tile):
                channel_start = i_channel_tile * channel_psize

                delta_i = nl.load(delta[i_batch, channel_start:channel_start + channel_psize, 0:seq_len])
                A_i = nl.load(A[channel_start:channel_start + channel_psize, i_state])

                # exp(delta * A): the per-channel A is the activation's per-partition scale.
                deltaA = nisa.activation(op=nl.exp, data=delta_i, scale=A_i)

                u_i = nl.load(u[i_batch, channel_start:channel_start + channel_psize, 0:seq_len])
                B_i = nl.load(B[i_batch, i_state:i_state + 1, 0:seq_len])

                deltaU = nisa.tensor_tensor(delta_i, u_i, op=nl.multiply)
                B_i_bcast = B_i.broadcast_to((channel_psize, seq_len))
                deltaBu = nisa.tensor_tensor(deltaU, B_i_bcast, op=nl.multiply)

                # h[t] = deltaA[t] * h[t-1] + deltaBu[t], along the free axis of every partition.
                scan_res = nisa.tensor_tensor_scan(deltaA, deltaBu, initial=0, op0=np.multiply, op1=np.add)

                C_i = nl.load(C[i_batch, i_state:i_state + 1, 0:seq_len])
                C_i_bcast = C_i.broadcast_to((channel_psize, seq_len))
                scanC = nisa.tensor_tensor(scan_res, C_i_bcast, op=nl.multiply)

                # Accumulating over i_state is an associative reduction, allowed in an affine_range.
                scanC_accum[i_channel_tile, 0:channel_psize, 0:seq_len] += scanC

        for i_channel_tile in nl.affine_range(n_channel_tile):
            channel_start = i_channel_tile * channel_psize
            nl.store(output[i_batch, channel_start:channel_start + channel_psize, 0:seq_len],
                     scanC_accum[i_channel_tile, 0:channel_psize, 0:seq_len])
    return output


@nki.jit
def mamba_v2(delta, u, A, B, C, seq_chunk=128):
    batch_size, channels, seq_len = delta.shape
    output = nl.ndarray((batch_size, channels, seq_len), dtype=delta.dtype, buffer=nl.shared_hbm)
    _, state_size = A.shape
    channel_psize = nl.tile_size.pmax
    assert channels % channel_psize == 0 and seq_len % seq_chunk == 0
    n_channel_tile = channels // channel_psize
    n_chunks = seq_len // seq_chunk

    i_p = nl.arange(channel_psize)[:, None]
    i_f = nl.arange(seq_chunk)[None, :]
    i_one = nl.arange(1)[None, :]

    for i_batch in nl.affine_range(batch_size):
        for i_channel_tile in nl.affine_range(n_channel_tile):
            channel_start = i_channel_tile * channel_psize
            delta_i = nl.load(delta[i_batch, channel_start:channel_start + channel_psize, 0:seq_len])
            u_i = nl.load(u[i_batch, channel_start:channel_start + channel_psize, 0:seq_len])
            A_i = nl.load(A[channel_start:channel_start + channel_psize, 0:state_size])
            deltaU = nisa.tensor_tensor(delta_i, u_i, op=nl.multiply)

            scanC_accum = nl.zeros((nl.par_dim(channel_psize), seq_len), dtype=nl.float32)
            for i_state in nl.affine_range(state_size):
                deltaA = nisa.activation(op=nl.exp, data=delta_i, scale=A_i[i_p, i_state + i_one])
                B_i = nl.load(B[i_batch, i_state:i_state + 1, 0:seq_len])
                C_i = nl.load(C[i_batch, i_state:i_state + 1, 0:seq_len])
                deltaBu = nisa.tensor_tensor(deltaU, B_i.broadcast_to((channel_psize, seq_len)), op=nl.multiply)

                # The state after each chunk seeds the next chunk's scan: a loop-carried dependence.
                scan_init = nl.zeros((channel_psize, 1), dtype=nl.float32)
                for i_chunk in nl.sequential_range(n_chunks):
                    cols = i_chunk * seq_chunk + i_f
                    scan_res = nisa.tensor_tensor_scan(deltaA[i_p, cols], deltaBu[i_p, cols], initial=scan_init,
                                                       op0=np.multiply, op1=np.add, dtype=nl.float32)
                    scan_init[i_p, i_one] = nl.copy(scan_res[i_p, seq_chunk - 1 + i_one])
                    scanC_accum[i_p, cols] += nisa.tensor_tensor(scan_res, C_i.broadcast_to(
                        (channel_psize, seq_len))[i_p, cols], op=nl.multiply)

            nl.store(output[i_batch, channel_start:channel_start + channel_psize, 0:seq_len],
                     nl.copy(scanC_accum, dtype=delta.dtype))
    return output
