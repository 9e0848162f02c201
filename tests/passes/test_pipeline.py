"""The pipeline verifies after every pass when asked (the suite asks) and names the pass that broke the IR; rules
reach ops inside loops."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.nodes import Op, Tensor
from nki_dsl.ir.types import TensorType
from nki_dsl.passes import PIPELINE, NkiPassError, run_pipeline
from nki_dsl.passes.rewrite import Pass
from tests.passes.lowering import traced


@nki.jit
def _exp_in_loop(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.exp(nl.load(x[i * 128:(i + 1) * 128, :])))
    return out


def _wrong_shape(op, ctx):
    bad = Tensor(op.result.name, TensorType((3, 3), "float32", op.result.type.buffer), "tile")
    return [Op(op.name, op.operands, op.attrs, bad, op.loc, op.mask)]


def test_a_pass_that_breaks_the_ir_is_named():
    ir, _ = traced(_exp_in_loop, np.zeros((256, 64), np.float32))
    with pytest.raises(NkiPassError, match="after pass 'break-exp'") as e:
        run_pipeline(ir, nki.get_target("trn2"), passes=[Pass("break-exp", {"nl.exp": _wrong_shape})])
    assert e.value.pass_name == "break-exp"


def test_by_default_a_passs_output_is_not_verified_again(monkeypatch):
    """Translation validation is the suite's (``CHECK_EACH_PASS``, on in tests/conftest.py): a call's compile
    trusts the passes and verifies only where IR enters; ``check_each_pass`` asks for it per call."""
    from nki_dsl.passes import pipeline

    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", False)
    ir, _ = traced(_exp_in_loop, np.zeros((256, 64), np.float32))
    broken = [Pass("break-exp", {"nl.exp": _wrong_shape})]
    times = {}
    out = run_pipeline(ir, nki.get_target("trn2"), passes=broken, times=times)
    assert any(getattr(s, "result", None) is not None and s.result.type.shape == (3, 3) for s, _ in out.walk())
    assert list(times) == ["pass break-exp"]
    with pytest.raises(NkiPassError, match="after pass 'break-exp'"):
        run_pipeline(ir, nki.get_target("trn2"), passes=broken, check_each_pass=True)


def test_pipeline_is_a_flat_list_of_named_passes_and_leaves_the_input_alone():
    assert [p.name for p in PIPELINE] == ["lower-language"]
    ir, _ = traced(_exp_in_loop, np.zeros((256, 64), np.float32))
    from nki_dsl.ir.printer import print_kernel

    before = print_kernel(ir)
    low = run_pipeline(ir, nki.get_target("trn1"))
    assert print_kernel(ir) == before  # the traced kernel (held by the jit cache) is not mutated
    assert "nisa.activation" in print_kernel(low) and "nl.exp" not in print_kernel(low)
