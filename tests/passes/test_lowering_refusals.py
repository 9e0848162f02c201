"""An op that ``lower-language`` cannot lower is a diagnostic naming the op, its source line and the reason
(``passes/rewrite.NkiRewriteError``, rule ``lower-language``), on every way in: the verifier lowers a kernel to
judge its placement, so a kernel no other rule refuses is refused for that (not run on NumPy and then crashing on
the simulator with a bare ``NotImplementedError``), and a compile of IR that skipped verification says the same.
IR another rule refuses and that does not lower either (a DMA without its attribute) gets that rule's message
alone.

Every op the language has now lowers, so the refusal is planted: the rule for ``nl.var`` is replaced, for these
tests, by one that cannot rewrite it (as a rule for a form it does not handle raises ``NotImplementedError``)."""

from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl import cli
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes import lower_math
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.passes.rewrite import NkiRewriteError
from tests.language.test_indirect_dma import DATA, gather_basic

TRN2 = nki.get_target("trn2")
X = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)


@nki.jit
def _masked_var(x):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    tile = nl.load(x)
    v = nl.var(tile, axis=1, keepdims=True, mask=(i_p < 100))  # (the planted rule cannot lower it)
    nl.store(out, value=v)
    return out


PLANTED = "a masked nl.var is not lowered (planted by the test)"


@pytest.fixture(autouse=True)
def unlowerable_var(monkeypatch):
    def refuse(op, ctx, x, r):
        raise NotImplementedError(PLANTED)

    monkeypatch.setitem(lower_math.REDUCE_FORMS, "var", refuse)


VAR_LINE = next(n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "v = nl.var(" in line)
REASON = f"pass 'lower-language' cannot rewrite it: {PLANTED}"


def _said(error):
    return [(d.loc.line, d.op, d.rule, d.message) for d in error.diagnostics]


WANT = [(VAR_LINE, "nl.var", "lower-language", REASON)]


def _text():
    from nki_dsl.ir.printer import print_kernel

    with pytest.raises(nki.NkiVerificationError):
        nki.trace(_masked_var, X)
    (entry,) = next(iter(_masked_var._traced.values()))  # traced, refused by the verifier
    return print_kernel(entry.kernel)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_a_kernel_that_does_not_lower_is_refused_at_its_call_naming_the_op(backend):
    with pytest.raises(nki.NkiVerificationError) as e:
        _masked_var(X, backend=backend)
    assert _said(e.value) == WANT
    assert str(e.value).endswith(f"test_lowering_refusals.py:{VAR_LINE}: nl.var: {REASON}")


def test_its_text_is_refused_by_the_loader_and_by_nki_check(tmp_path, capsys):
    text = _text()
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_ir(text, target="trn2")
    assert _said(e.value) == WANT
    path = tmp_path / "masked_var.nkir"
    path.write_text(text)
    assert cli.main(["check", str(path), "--target", "trn2"]) == 1
    assert "cannot rewrite it: a masked nl.var" in " ".join(capsys.readouterr().out.split())


def test_compiling_it_unverified_raises_the_same_diagnostic():
    with pytest.raises(NkiRewriteError) as e:
        compile_for_target(parse_kernel(_text()), TRN2)
    assert _said(e.value) == WANT and e.value.pass_name == "lower-language"
    assert isinstance(e.value.__cause__, NotImplementedError)


def test_ir_another_rule_refuses_gets_that_rules_message_alone():
    text = nki.trace(gather_basic, DATA, np.zeros((128, 1), np.int32), target="trn2").text
    assert " {indirect_dim = 1}" in text
    bad = text.replace(" {indirect_dim = 1}", "")
    with pytest.raises(NkiRewriteError, match="KeyError: 'indirect_dim'"):  # it does not lower
        compile_for_target(parse_kernel(bad), TRN2)
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_ir(bad, target="trn2")
    assert [d.rule for d in e.value.diagnostics] == ["indirect-dma"]
