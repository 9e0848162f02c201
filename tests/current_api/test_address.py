"""``nl.ndarray(..., address=(partition, byte offset))``: honoured by the allocator, checked for bank alignment,
start partition, capacity and overlap (reference/nki.md §1.1, §1.2, §2.7 "ndarray")."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError, NkiVerificationError
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.targets import get_target

X = np.arange(128 * 256, dtype=np.float32).reshape(128, 256) / 1e4


def _kernel(a_addr, b_addr, p_addr=(0, 2048), parts=128):
    @nki.jit
    def k(x):
        out = nl.ndarray((parts, 256), x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((parts, 256), x.dtype, buffer=nl.sbuf, address=a_addr)
        b = nl.ndarray((parts, 256), x.dtype, buffer=nl.sbuf, address=b_addr)
        nisa.dma_copy(dst=a, src=x[0:parts, :])
        nisa.activation(dst=b, op=nl.exp, data=a)
        p = nl.ndarray((parts, 256), nl.float32, buffer=nl.psum, address=p_addr)
        nisa.tensor_tensor(dst=p, data1=a, data2=b, op=nl.add)
        nisa.tensor_copy(dst=a, src=p)
        nisa.dma_copy(dst=out, src=a)
        return out

    return k


def test_addresses_are_honoured_and_numbers_unchanged():
    k = _kernel((0, 4096), (0, 8192))
    np.testing.assert_allclose(k(X), X + np.exp(X), rtol=1e-6)
    _, alloc = compile_for_target(nki_dsl.trace(k, X, target="trn2").ir, get_target("trn2"))
    placed = {(p.buffer, p.partition_start, p.byte_offset) for p in alloc.placements.values()}
    assert {("sbuf", 0, 4096), ("sbuf", 0, 8192), ("psum", 0, 2048)} <= placed
    out, profile = nki.simulate(k, X, target="trn2")
    np.testing.assert_allclose(out, X + np.exp(X), rtol=1e-6)


def test_overlapping_live_placements_are_refused():
    k = _kernel((0, 4096), (0, 4608))  # a takes 1 KiB per partition from 4096: b starts inside it
    with pytest.raises(NkiVerificationError, match=r"placement of %\w+: overlaps %\w+ .*while both are live"):
        nki.simulate(k, X, target="trn2")


def test_placements_beyond_the_partition_are_refused_per_target():
    k = _kernel((0, 230 * 1024), (0, 0))  # inside trn3's 256 KiB partition, past trn2's 224 KiB
    nki.simulate(k, X, target="trn3")
    with pytest.raises(NkiVerificationError, match="exceed the 229376 of a trn2 partition"):
        nki.simulate(k, X, target="trn2")


@pytest.mark.parametrize("kwargs, message", [
    (dict(a_addr=(0, 0), b_addr=(0, 1024), p_addr=(0, 1000)), "bank boundary"),
    (dict(a_addr=(32, 0), b_addr=(0, 1024), parts=64), "starts at a multiple of 64"),
    (dict(a_addr=(96, 0), b_addr=(0, 1024), parts=64), "outside 0..127"),
    (dict(a_addr=(0, 0, 0), b_addr=(0, 1024)), "partition_offset, free_offset_bytes"),
])  # fmt: skip
def test_bad_addresses_are_refused_at_the_kernel_line(kwargs, message):
    with pytest.raises(NkiApiError, match=message):
        _kernel(**kwargs)(X)
