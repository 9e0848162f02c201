"""The allocator takes the placing rules' live ranges and one-copy fits when it allocates the very lowering they
judged (``passes/pipeline.compile_for_target``, ``AllocatorView.fit``): the placements and the ``nki asm`` listing
are the ones it computes from scratch on the same kernel, over kernels with rotating copies, placements the kernel
chose (``address=``), block-local PSUM tensors and masked tiles; and the reuse really happened (one walk)."""

import pytest

import nki_dsl as nki
from nki_dsl.passes import allocate as allocate_module
from nki_dsl.passes import pipeline
from nki_dsl.passes.listing import listing
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.passes.verifier import check
from nki_dsl.trace import jit

TRN2 = nki.get_target("trn2")


def _vit():
    from kernels.vit_attn.kernel import attention_kernel

    return attention_kernel, (*(nki.spec((1, 2, 197, 64), "bfloat16"),) * 3, 0.125)


def _matmul():
    from kernels.matmul import matmul_tiled

    return matmul_tiled, (nki.spec((256, 128), "float32"), nki.spec((256, 512), "float32"))


def _softmax_masked():
    from kernels.softmax.kernel import softmax_kernel

    return softmax_kernel, (nki.spec((300, 512), "float32"),)


def _chosen_addresses():
    from tests.current_api.test_address import _kernel

    return _kernel((0, 4096), (0, 8192)), (nki.spec((128, 256), "float32"),)


def _block_local_psum():
    from tests.verify.test_psum_live_blocks import v8a_scores

    return v8a_scores, (nki.spec((64, 1024), "float32"), nki.spec((64, 1024), "float32"))


CASES = {"vit_attn": _vit, "matmul_tiled": _matmul, "softmax_masked": _softmax_masked,
         "chosen_addresses": _chosen_addresses, "block_local_psum": _block_local_psum}  # fmt: skip


@pytest.mark.parametrize("each_pass", [False, True], ids=["default", "check-each-pass"])
@pytest.mark.parametrize("case", list(CASES))
def test_allocating_with_the_verifiers_answers_places_as_from_scratch(case, each_pass, monkeypatch):
    monkeypatch.setattr(jit, "TRACE_HOOKS", [])  # (the suite's round trip verifies a parsed copy: other walks)
    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", each_pass)
    walks = []
    real = allocate_module.live_ranges
    monkeypatch.setattr(allocate_module, "live_ranges", lambda k: walks.append(k) or real(k))
    kernel, args = CASES[case]()
    ir = nki.trace(kernel, *args, target=TRN2).ir  # (from the jit cache when an earlier case traced it)
    check(ir, TRN2)  # the verification a first call runs: it keeps its lowering and the placing rules' view
    del walks[:]
    lowered, reused = compile_for_target(ir, TRN2)
    assert walks == []  # the placing rules' walk of that lowering is the one the allocator used
    fresh = allocate_module.allocate(lowered, TRN2)
    assert len(walks) == 1 and walks[0] is lowered
    assert reused.placements == fresh.placements and reused.placements
    assert listing(lowered, reused) == listing(lowered, fresh)
    if case == "matmul_tiled":  # (the cases reach what they are named for)
        assert any(p.buffers > 1 for p in fresh.placements.values())
    if case == "chosen_addresses":
        assert {(p.buffer, p.byte_offset) for p in fresh.placements.values()} >= {("sbuf", 4096), ("sbuf", 8192)}
    if case == "block_local_psum":
        assert any(p.shared_blocks for p in fresh.placements.values())


def test_the_view_of_a_lowering_is_not_taken_for_the_unlowered_kernel():
    """A pass list that does not lower: the check of its output judged placement on a lowering of that output, so
    no view is handed on and the allocator would walk the kernel it is given."""
    from nki_dsl.passes.rewrite import Pass

    kernel, args = _softmax_masked()
    ir = nki.trace(kernel, *args, target=TRN2).ir
    out, view = pipeline._run(ir, TRN2, [Pass("keep-all", {})], None, True)
    assert view is None and any(getattr(s, "name", "").startswith("nl.") for s, _ in out.walk())
    out, view = pipeline._run(ir, TRN2, pipeline.PIPELINE, None, True)
    assert view is not None and view.kernel is out
