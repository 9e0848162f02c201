"""``nisa.sendrecv`` and ``nisa.core_barrier`` (reference/nki.md §2.7 "Multi-core"): the two cores of an LNC=2
launch exchange tiles and wait for each other. Each test runs on the backend of the ``kernel_backend`` fixture
(NumPy reference, JAX) against float64 formulas; the simulator's side is in
tests/current_api/test_lnc_collectives.py."""

import ml_dtypes
import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl import backends
from nki_dsl.errors import NkiRuntimeError, SourceLoc
from nki_dsl.ir.cores import Meet, run_cores
from nki_dsl.ir.printer import print_kernel
from tests.backend_fixture import backend_independent
from tests.current_api import lnc_kernels as k

X = np.random.default_rng(3).standard_normal((2, 128, 64)).astype(np.float32)


def test_sendrecv_gives_each_core_the_other_cores_tile(kernel_backend):
    out = np.asarray(k.exchange_sum[2](X, backend=kernel_backend))
    expected = X.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(out, np.stack([expected, expected]), rtol=1e-6, atol=1e-6)


def test_sendrecv_converts_nothing_it_moves_the_bits_of_the_tile(kernel_backend):
    kernel = k.exchange(lambda c: 1 - c, lambda c: 1 - c)
    out = np.asarray(kernel[2](X, backend=kernel_backend))
    np.testing.assert_array_equal(out, X[::-1])  # core c got core 1-c's tile


def test_after_a_barrier_each_core_reads_what_the_other_wrote(kernel_backend):
    out = np.asarray(k.barrier_swap[2](X, backend=kernel_backend))
    np.testing.assert_array_equal(out, 2 * X[::-1])


# barrier_swap without its barrier: core 0 reads core 1's half before core 1 has written it (a race).
_no_barrier = k.scratch_swap("_no_barrier", barrier=False, double=False)


def test_the_barrier_is_what_orders_the_shared_writes():
    # the same exchange through shared HBM without the barrier: the two cores run at once, so core 0 may read core
    # 1's half before core 1 has written it; the verifier's core-race rule refuses the kernel, naming both lines
    with pytest.raises(nki_dsl.NkiVerificationError) as e:
        _no_barrier[2](X)
    (d,) = e.value.diagnostics
    write, read = k.line_of(_no_barrier, "dst=scratch[c], src=t"), k.line_of(_no_barrier, "src=scratch[1 - c]")
    assert (d.rule, d.op, d.loc.line) == ("core-race", "nisa.dma_copy", write)
    assert (f"core 0 writes %1[128, 64] in 'shared_hbm' and core 1 reads %1[128, 64] in 'shared_hbm' at line "
            f"{read} (nisa.dma_copy) in the same phase") in d.message


@nki.jit
def _bf16_columns(x, out):
    """x [2, P, F] bf16: core c sends columns [c*F/2, (c+1)*F/2) of its tile and writes what it receives, then
    both wait at a barrier over ``out`` (a kernel argument, written in place)."""
    _, P, F = x.shape
    half = F // 2
    c = nl.program_id(0)
    t = nl.ndarray((P, F), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[c])
    got = nl.ndarray((P, half), nl.bfloat16, buffer=nl.sbuf)
    nisa.sendrecv(src=t[:, nl.ds(c * half, half)], dst=got, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=3,
                  dma_engine=nisa.dma_engine.gpsimd_dma)
    nisa.dma_copy(dst=out[c], src=got)
    nisa.core_barrier(data=out, cores=(0, 1), engine=nisa.engine.scalar)


def test_sendrecv_of_a_bf16_view_keeps_its_bits(kernel_backend):
    x = np.random.default_rng(4).standard_normal((2, 128, 64)).astype(ml_dtypes.bfloat16)
    out = np.zeros((2, 128, 32), ml_dtypes.bfloat16)
    _bf16_columns[2](x, out, backend=kernel_backend)
    np.testing.assert_array_equal(out[0], x[1][:, 32:])  # core 0 got core 1's columns of core 1's half
    np.testing.assert_array_equal(out[1], x[0][:, :32])


def test_the_exchanges_verify_and_run_the_same_after_a_round_trip(kernel_backend):
    bf16 = X.astype(ml_dtypes.bfloat16)
    written = np.zeros((2, 128, 32), bf16.dtype)
    cases = [(k.exchange_sum, (X,)), (k.barrier_swap, (X,)), (_bf16_columns, (bf16, written))]
    target = nki_dsl.get_target("trn2")
    for kernel, args in cases:
        traced = nki_dsl.trace(kernel[2], *args)
        text = print_kernel(traced.ir)
        parsed = nki_dsl.parse_ir(text, target="trn2")
        assert print_kernel(parsed.ir) == text
        runs = []
        for ir in (traced.ir, parsed.ir):
            arrays = {p.name: a.copy() for p, a in zip(ir.params, args)}
            out = backends.load(kernel_backend).compile_kernel(ir, target).run(arrays)
            runs.append([np.asarray(out if out is not None else arrays[ir.params[-1].name])])
        np.testing.assert_array_equal(*runs)


def _program(*meets, result=None):
    yield from meets
    return result


@backend_independent
def test_the_driver_refuses_cores_that_do_not_meet():
    loc = SourceLoc("k.py", 7)
    barrier = Meet("nisa.core_barrier", loc)
    with pytest.raises(NkiRuntimeError, match="deadlock: one core has finished"):
        run_cores([_program(barrier), _program()])
    other = Meet("nisa.core_barrier", SourceLoc("k.py", 9))
    with pytest.raises(NkiRuntimeError, match="core 0 waits at nisa.core_barrier \\(line 7\\) and core 1 waits"):
        run_cores([_program(barrier), _program(other)])
    send = [Meet("nisa.sendrecv", loc, 1 - c, 1 - c, c, np.zeros((2, 2)), (2, 2), "float32") for c in (0, 1)]
    with pytest.raises(NkiRuntimeError, match="core 0 uses pipe 0 and core 1 pipe 1"):
        run_cores([_program(send[0]), _program(send[1])])
    assert run_cores([_program(barrier, result="a"), _program(barrier, result="b")]) == "b"
