"""Rule ``core-race``: in a kernel whose cores meet at sync ops, no shared-HBM element is written by one core and
touched by the other between the same two sync points (reference/nki.md §2.7 "Multi-core")."""

from __future__ import annotations

import numpy as np
import pytest

import nki_dsl as nki
from tests.current_api import lnc_kernels as k

X = np.zeros((2, 128, 64), np.float32)


def test_exchanges_ordered_by_sync_ops_and_disjoint_parts_are_accepted():
    for kernel in (k.exchange_sum, k.barrier_swap):
        nki.trace(kernel[2], X)


def test_golden_reusing_a_scratch_the_peer_still_reads(golden, rejected):
    golden("core-race", rejected(k.reuse_scratch[2], X))


def test_kernels_without_sync_ops_are_not_checked():
    # an SPMD grid's programs run one after another (§1.5): what one writes the next may read
    import nki_dsl.language as nl

    @nki.jit
    def serial(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x[nl.program_id(0)]))
        return out

    nki.trace(serial[2], X)


def test_a_shape_family_cannot_hold_sync_ops():
    # core-race's phases follow trip counts, so it is argued for concrete kernels only (verify/family.py)
    import nki_dsl.current as current
    import nki_dsl.current.isa as nisa
    import nki_dsl.current.language as cnl

    @current.jit
    def family_barrier(x):
        out = cnl.ndarray(x.shape, cnl.float32, buffer=cnl.shared_hbm)
        t = cnl.ndarray((128, 64), cnl.float32, buffer=cnl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:128, :])
        nisa.dma_copy(dst=out[0:128, :], src=t)
        flag = cnl.ndarray((1, 1), cnl.float32, buffer=cnl.shared_hbm)
        nisa.core_barrier(flag, (0, 1))
        return out

    with pytest.raises(nki.NkiError, match="a shape family cannot hold sync ops"):
        nki.trace(family_barrier[2], nki.spec(("N", 64), "float32", dims={"N": (128, 1024)}))
