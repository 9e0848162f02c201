"""Rule ``core-sync``: ``nisa.sendrecv`` / ``nisa.core_barrier`` only where both cores of an LNC=2 launch meet
each of them (reference/nki.md §2.7 "Multi-core"); a kernel whose cores would deadlock is refused with its line."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.nodes import Imm, Op
from nki_dsl.passes.verifier import verify_kernel
from tests.current_api import lnc_kernels as k

X = np.zeros((2, 128, 64), np.float32)


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_an_exchange_and_a_barrier_between_the_two_cores_are_accepted(target):
    nki.trace(k.exchange_sum[2], X, target=target)
    nki.trace(k.barrier_swap[2], X, target=target)


def test_golden_a_core_sending_to_itself_deadlocks(golden, rejected):
    golden("core-sync", rejected(k.exchange(lambda c: c, lambda c: 1 - c)[2], X))


def test_golden_a_rank_that_is_no_core(golden, rejected):
    golden("core-sync", rejected(k.exchange(lambda c: 1 - c, lambda c: 2 - c)[2], X), "no-core")


def test_golden_sync_ops_need_two_cores(golden, rejected):
    golden("core-sync", rejected(k.exchange_sum, X), "one-core")


def test_golden_sync_ops_need_neuroncore_v3(golden, rejected):
    golden("core-sync", rejected(k.exchange_sum[2], X, target="trn1"), "trn1")


def test_golden_src_and_dst_differ_in_dtype(golden, rejected):
    golden("core-sync", rejected(k.exchange(lambda c: 1 - c, lambda c: 1 - c, src_dtype=np.float16)[2], X), "dtype")


def test_golden_gpsimd_dma_moves_at_most_1_kib_per_partition(golden, rejected):
    wide = np.zeros((2, 128, 512), np.float32)  # 2 KiB per partition
    kernel = k.exchange(lambda c: 1 - c, lambda c: 1 - c, dma_engine=nki.current.isa.dma_engine.gpsimd_dma)
    golden("core-sync", rejected(kernel[2], wide), "gpsimd-dma")
    nki.trace(kernel[2], np.zeros((2, 128, 256), np.float32))  # 1 KiB: the limit itself


def test_golden_a_barrier_joins_both_cores(golden, rejected):
    golden("core-sync", rejected(k.barrier_swap[2], X, (0,)), "barrier-cores")


def _with(kernel, op_name: str, change) -> list:
    ir = copy.deepcopy(nki.trace(kernel[2], X).ir)
    (op,) = [s for s, _ in ir.walk() if isinstance(s, Op) and s.name == op_name]
    change(op)
    return verify_kernel(ir, nki.get_target("trn2"))


def test_a_sync_op_under_a_mask_of_the_core_id_is_refused():
    # parsed IR can carry what the tracer never makes: a sendrecv only core 0 runs would leave core 1 waiting
    only_core0 = Mask.of(Affine.var("pid0", -1))
    found = _with(k.exchange_sum, "nisa.sendrecv", lambda op: setattr(op, "mask", only_core0))
    assert [d.rule for d in found] == ["core-sync"] and "under a mask" in found[0].message
    assert found[0].loc.line > 0 and found[0].op == "nisa.sendrecv"
    found = _with(k.barrier_swap, "nisa.core_barrier", lambda op: setattr(op, "mask", only_core0))
    assert [d.rule for d in found] == ["core-sync"]


def test_a_rank_that_follows_a_loop_index_is_refused():
    found = _with(k.exchange_sum, "nisa.sendrecv", lambda op: op.attrs.update(send_to_rank=Affine.var("i0")))
    assert any("depends on i0" in d.message for d in found)


@pytest.mark.parametrize("operand", ["src", "dst"])
def test_a_sendrecv_operand_that_is_no_tile_is_a_structure_error_not_a_crash(operand):
    # core-sync compares src with dst only once the structure rule has passed both as tiles
    found = _with(k.exchange_sum, "nisa.sendrecv", lambda op: op.operands.update({operand: Imm(1.0)}))
    assert [(d.rule, d.message) for d in found] == [("structure", f"operand '{operand}' must be a tile, not the "
                                                                  f"number 1.0")]  # fmt: skip
    found = _with(k.exchange_sum, "nisa.sendrecv", lambda op: op.operands.pop(operand))
    assert [d.rule for d in found] == ["structure"] and f"'{operand}'" in found[0].message, found
