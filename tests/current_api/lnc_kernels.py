"""Kernels whose two cores (``kernel[2]``) exchange data with ``nisa.sendrecv`` or wait for each other with
``nisa.core_barrier`` (reference/nki.md §2.7 "Multi-core"), shared by the tests of the instructions, of the
verifier's ``core-sync`` rule and of the LNC=2 kernels."""

import inspect

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl


@nki.jit
def exchange_sum(x):
    """x [2, P, F]: core c holds x[c]; both cores end with x[0] + x[1], written to out[c]."""
    _, P, F = x.shape
    out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
    c = nl.program_id(0)
    mine = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[c])
    theirs = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
    total = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    nisa.dma_copy(dst=out[c], src=total)
    return out


def exchange(send_to, recv_from, src_dtype=nl.float32, dma_engine=nisa.dma_engine.dma):
    """``exchange_sum``'s exchange with the ranks (functions of the core id) and the engine given."""

    @nki.jit
    def k(x):
        _, P, F = x.shape
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        mine = nl.ndarray((P, F), src_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[c])
        theirs = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=send_to(c), recv_from_rank=recv_from(c), pipe_id=0,
                      dma_engine=dma_engine)
        nisa.dma_copy(dst=out[c], src=theirs)
        return out

    return k


def scratch_swap(name: str, *, barrier: bool = True, double: bool = True, reuse: bool = False):
    """A kernel ``name(x, cores=(0, 1))``: each core writes its half of x (doubled when ``double``) into a shared
    scratch, waits at a barrier over ``cores`` (when ``barrier``), then reads the other core's half and writes it
    to out[c]. With ``reuse`` each core then writes what it read back into its own half of the scratch."""

    def swap(x, cores=(0, 1)):
        _, P, F = x.shape
        out = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        scratch = nl.ndarray((2, P, F), nl.float32, buffer=nl.shared_hbm)
        c = nl.program_id(0)
        t = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c])
        if double:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=scratch[c], src=t)
        if barrier:
            nisa.core_barrier(scratch, cores)
        back = nl.ndarray((P, F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=back, src=scratch[1 - c])
        if reuse:
            nisa.dma_copy(dst=scratch[c], src=back)
        nisa.dma_copy(dst=out[c], src=back)
        return out

    swap.__name__ = swap.__qualname__ = name
    return nki.jit(swap)


# out[c] = 2 * x[1 - c]. Without the barrier the read would race with the peer's write.
barrier_swap = scratch_swap("barrier_swap")
# After the swap each core reuses its half of the scratch with no barrier between its write and the peer's read of
# the first result: the cores race on scratch[c] (refused by rule core-race).
reuse_scratch = scratch_swap("reuse_scratch", double=False, reuse=True)


def line_of(kernel, text: str) -> int:
    """The source line of ``kernel``'s body that contains ``text`` (one line only)."""
    lines, first = inspect.getsourcelines(kernel.fn)
    (at,) = [first + i for i, line in enumerate(lines) if text in line]
    return at
