"""A kernel is lowered once per (kernel, target) on the way from tracing (or parsing) through verification to a
compiled program: the verifier's placing rules read the ``lower-language`` result (``passes/verifier.py``) and
the pipeline compiles from it. By default compiling verifies nothing more (``passes/pipeline.CHECK_EACH_PASS``,
on in the suite) and the allocator takes the live ranges and one-copy fits the placing rules computed. Counted by
wrapping the rewrite engine, the verifier and the live-range walk, not timed. Every way in (a jit call, the Hub's
parse of untrusted text, a family's instance, the CLI) gives one answer, from one verifier."""

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl import cli
from nki_dsl import verify as verify_module
from nki_dsl.passes import allocate as allocate_module
from nki_dsl.passes import pipeline
from nki_dsl.passes import rewrite as rewrite_module
from nki_dsl.passes.lower_language import LOWER_LANGUAGE
from nki_dsl.passes.pipeline import compile_for_target
from nki_dsl.passes.verifier import check
from nki_dsl.targets import get_target
from nki_dsl.trace import jit

TRN2, TRN1 = get_target("trn2"), get_target("trn1")


@nki.jit
def _exp_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(math.ceil(n / 128)):
        rows = t * 128 + i_p
        tile = nl.load(x[rows, i_f], mask=(rows < n))
        nl.store(out[rows, i_f], value=nl.exp(tile), mask=(rows < n))
    return out


@dataclass
class Counts:
    lowerings: list = field(default_factory=list)  # (kernel name, target name) of each lower-language rewrite
    verifications: int = 0  # runs of the verifier's rules (a check, after a trace, a parse or a pass)
    live_walks: int = 0  # live-range computations (the placing rules' and the allocator's)


@pytest.fixture
def counts(monkeypatch):
    """What a test's calls cost, counted (without the suite's round trip of every traced kernel, tests/conftest.py,
    which verifies a parsed copy: another kernel). The suite's check of each pass's output stays on."""
    monkeypatch.setattr(jit, "TRACE_HOOKS", [])
    c = Counts()
    real_rewrite, real_verify, real_lives = rewrite_module.rewrite, verify_module._verify, allocate_module.live_ranges

    def rewrite(kernel, rules_pass, target):
        if rules_pass is LOWER_LANGUAGE:
            c.lowerings.append((kernel.name, target.name))
        return real_rewrite(kernel, rules_pass, target)

    def verified(*args):
        c.verifications += 1
        return real_verify(*args)

    def lives(kernel):
        c.live_walks += 1
        return real_lives(kernel)

    monkeypatch.setattr(rewrite_module, "rewrite", rewrite)
    monkeypatch.setattr(verify_module, "_verify", verified)
    monkeypatch.setattr(allocate_module, "live_ranges", lives)
    return c


@pytest.fixture
def lowerings(counts):
    """The ``lower-language`` rewrites run, as (kernel name, target name) pairs."""
    return counts.lowerings


def _x(rows=300):
    return np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32)


def _fresh_jit():
    return nki.jit(_exp_rows.fn)  # its own trace cache, so the test sees the first call


def test_a_jit_call_on_the_simulator_lowers_once(lowerings):
    kernel, x = _fresh_jit(), _x()
    out = kernel(x, backend="simulator", target="trn2")
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-5)
    assert lowerings == [("_exp_rows", "trn2")]
    kernel(x, backend="simulator", target="trn2")  # cached: nothing more
    assert len(lowerings) == 1
    kernel(x, backend="simulator", target="trn1")  # another target is another lowering
    assert lowerings == [("_exp_rows", "trn2"), ("_exp_rows", "trn1")]


@pytest.mark.parametrize("each_pass", [False, True], ids=["default", "check-each-pass"])
def test_a_first_simulator_call_costs_one_lowering_one_live_walk_and_one_verification(counts, monkeypatch,
                                                                                     each_pass):  # fmt: skip
    """By default compiling adds no verification to the trace's, and the allocator takes the placing rules' live
    ranges; checking each pass's output verifies the lowered kernel once more, with those same answers."""
    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", each_pass)
    kernel, x = _fresh_jit(), _x()
    np.testing.assert_allclose(kernel(x, backend="simulator", target="trn2"), np.exp(x), rtol=1e-5)
    assert (len(counts.lowerings), counts.live_walks, counts.verifications) == (1, 1, 2 if each_pass else 1)


def test_compiling_a_kernel_whose_lowering_was_not_kept_walks_it_again(counts, monkeypatch):
    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", False)
    ir = nki.trace(_fresh_jit(), nki.spec((300, 64), "float32")).ir
    compile_for_target(ir, TRN2)
    assert (len(counts.lowerings), counts.live_walks, counts.verifications) == (1, 1, 1)
    compile_for_target(ir, TRN2)  # taken by the first compile: lowered and walked again, not verified
    assert (len(counts.lowerings), counts.live_walks, counts.verifications) == (2, 2, 1)


def test_the_hub_path_parse_verify_compile_lowers_once(counts, monkeypatch):
    monkeypatch.setattr(pipeline, "CHECK_EACH_PASS", False)
    text = nki.trace(_fresh_jit(), nki.spec((300, 64), "float32")).text
    counts.__init__()
    traced = nki.parse_ir(text, target="trn2")  # untrusted text: parsed and verified
    exe = traced.compile(backend="simulator", target="trn2")
    x = _x()
    np.testing.assert_allclose(exe.run({traced.param_names[0]: x}), np.exp(x), rtol=1e-5)
    assert (len(counts.lowerings), counts.live_walks, counts.verifications) == (1, 1, 1)


def test_a_family_instance_is_lowered_once(lowerings):
    family = nki.trace(_fresh_jit(), nki.spec(("N", 64), "float32", dims={"N": (1, 4096)}))
    parsed = nki.parse_family(family.text)
    del lowerings[:]
    instance = parsed.instantiate((300, 64), target="trn2")
    compile_for_target(instance.ir, TRN2)
    assert len(lowerings) == 1


def test_nki_asm_lowers_once(lowerings, capsys):
    assert cli.main(["asm", f"{__file__}:_exp_rows", "--arg", "x=300x64:float32", "--target", "trn1"]) == 0
    assert "activation" in capsys.readouterr().out
    assert lowerings == [("_exp_rows", "trn1")]


def test_a_verification_judges_the_kernel_as_it_is_and_the_compiler_takes_that_lowering(lowerings):
    ir = nki.trace(_fresh_jit(), nki.spec((300, 64), "float32")).ir
    del lowerings[:]
    check(ir, TRN2)
    check(ir, TRN2)  # each verification lowers: it judges the kernel, never an earlier result
    assert len(lowerings) == 2
    lowered, _ = compile_for_target(ir, TRN2)  # the last one's lowering, taken once
    assert len(lowerings) == 2 and not any(getattr(s, "name", "") == "nl.exp" for s, _ in lowered.walk())
    compile_for_target(ir, TRN2)  # taken: compiling again lowers again
    assert len(lowerings) == 3


@nki.jit
def _two_wide_rows(x):
    """Two tiles of 117 KiB per partition live at once, and their sum: more than a trn2 partition's SBUF."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(math.ceil(n / 128)):
        rows = t * 128 + i_p
        a = nl.load(x[rows, i_f], mask=(rows < n))
        b = nl.load(x[rows, i_f], mask=(rows < n))
        nl.store(out[rows, i_f], value=nl.add(a, b), mask=(rows < n))
    return out


def _said(error):
    return [(d.rule, d.op, d.loc.line, d.message) for d in error.diagnostics]


def _unverified_text(kernel):
    from nki_dsl.ir.printer import print_kernel

    (entry,) = next(iter(kernel._traced.values()))  # traced, refused by the verifier
    return print_kernel(entry.kernel)


def test_every_way_in_gets_the_same_answer(tmp_path, capsys):
    kernel, width = nki.jit(_two_wide_rows.fn), 30000
    with pytest.raises(nki.NkiVerificationError) as traced:
        nki.trace(kernel, nki.spec((300, width), "float32"), target="trn2")
    said = _said(traced.value)
    assert [s[0] for s in said] == ["sbuf-capacity"]
    text = _unverified_text(kernel)
    with pytest.raises(nki.NkiVerificationError) as parsed:  # the Hub loader's way: untrusted text
        nki.parse_ir(text, target="trn2")
    assert _said(parsed.value) == said
    path = tmp_path / "two_wide_rows.nkir"
    path.write_text(text)
    assert cli.main(["check", str(path), "--target", "trn2"]) == 1  # `nki check`, as a publisher runs it
    assert said[0][3][:60] in " ".join(capsys.readouterr().out.split())
    # a family of it: refused when proved, and each instance of its (unproved) text refused when loaded
    family_kernel = nki.jit(_two_wide_rows.fn)
    with pytest.raises(nki.NkiVerificationError) as proved:
        nki.trace(family_kernel, nki.spec(("N", width), "float32", dims={"N": (1, 4096)}), target="trn2")
    assert {(r, o, line) for r, o, line, _ in _said(proved.value)} == {s[:3] for s in said}  # (at N = 1 and at 4096)
    with pytest.raises(nki.NkiVerificationError) as loaded:
        nki.parse_family(_unverified_text(family_kernel)).instantiate((300, width), target="trn2")
    assert _said(loaded.value) == [(r, o, line, f"at N = 300: {m}") for r, o, line, m in said]


def test_a_lowering_never_compiled_is_not_kept_for_ever(lowerings, monkeypatch):
    """A kernel verified but run from its traced IR (NumPy, JAX) does not keep its lowering: past ``MAX_KEPT``
    newer verifications it is dropped, and compiling lowers again (correct either way; only the reuse is lost)."""
    from nki_dsl.passes import verifier

    monkeypatch.setattr(verifier, "MAX_KEPT", 2)
    kernels = [nki.trace(_fresh_jit(), nki.spec((128 * k, 64), "float32")).ir for k in (1, 2, 3)]
    assert len(lowerings) == 3
    compile_for_target(kernels[2], TRN2)
    compile_for_target(kernels[1], TRN2)
    assert len(lowerings) == 3  # the two newest were kept
    compile_for_target(kernels[0], TRN2)
    assert len(lowerings) == 4  # the oldest was not
