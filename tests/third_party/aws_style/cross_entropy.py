"""Softmax cross-entropy loss, NKI 0.6 API, in the style of a training-kernel library.

logits: [T, V] (bf16 or fp32), labels: [T, 1] int32 -> loss [T, 1] fp32 written into the caller's array
(the kernel returns nothing): loss = logsumexp(logits) - logits[label].
The label's logit is picked with range_select (column j kept when label <= j < label + 1, its row max read from
the accumulator); the vocabulary is processed in chunks with a running max and sum (online logsumexp).
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def cross_entropy_loss(logits, labels, loss, chunk=512):
    T, V = logits.shape
    P = nl.tile_size.pmax
    n_chunks = (V + chunk - 1) // chunk
    for t in nl.affine_range(T // P):
        lab_i = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=lab_i, src=labels[nl.ds(t * P, P), :])
        lo = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=lo, src=lab_i)
        hi = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=hi, data=lo, op0=nl.add, operand0=1.0)

        run_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        run_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        picked = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=picked, value=-3.0e38)
        for c in nl.sequential_range(n_chunks):
            width = min(chunk, V - c * chunk)
            x = nl.ndarray((P, chunk), dtype=logits.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x[:, 0:width], src=logits[nl.ds(t * P, P), nl.ds(c * chunk, width)])

            # the label's logit if it falls in this chunk (range_start shifts the column numbers)
            sel = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
            here = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.range_select(dst=sel[:, 0:width], on_true_tile=x[:, 0:width], comp_op0=nl.greater_equal,
                              comp_op1=nl.less, bound0=lo, bound1=hi, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                              reduce_res=here, reduce_op=nl.maximum, range_start=c * chunk)
            nisa.tensor_tensor(dst=picked, data1=picked, data2=here, op=nl.maximum)

            m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=m, op=nl.max, data=x[:, 0:width], axis=1, keepdims=True)
            if c == 0:
                nisa.tensor_copy(dst=run_max, src=m)
                neg = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=neg, data=run_max, op0=nl.multiply, operand0=-1.0)
                e = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation_reduce(dst=e[:, 0:width], op=nl.exp, data=x[:, 0:width], reduce_op=nl.add,
                                       reduce_res=run_sum, bias=neg)
            else:
                new_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=new_max, data1=run_max, data2=m, op=nl.maximum)
                neg = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=neg, data=new_max, op0=nl.multiply, operand0=-1.0)
                # rescale the running sum: sum *= exp(old_max - new_max)
                corr = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=corr, op=nl.exp, data=run_max, bias=neg)
                nisa.tensor_tensor(dst=run_sum, data1=run_sum, data2=corr, op=nl.multiply)
                part = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                e = nl.ndarray((P, chunk), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation_reduce(dst=e[:, 0:width], op=nl.exp, data=x[:, 0:width], reduce_op=nl.add,
                                       reduce_res=part, bias=neg)
                nisa.tensor_tensor(dst=run_sum, data1=run_sum, data2=part, op=nl.add)
                nisa.tensor_copy(dst=run_max, src=new_max)

        # loss = log(sum) + max - picked
        lse = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=lse, op=nl.log, data=run_sum)
        res = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=res, data=lse, op0=nl.add, operand0=run_max, op1=nl.subtract,
                                  operand1=picked)
        nisa.dma_copy(dst=loss[nl.ds(t * P, P), :], src=res)
