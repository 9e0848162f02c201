"""vit-attn's keywords without trust: a fetched vit-attn (no ``trust_remote_code``) runs ``scale=`` (any value: the
runtime-scale twins of the families over S take it as a one-element float32 array, kernel.toml's required
``scalars``) and ``strategy="resident"`` / ``"auto"`` (the S <= 512 families' ``constants = { strategy = ["auto",
"resident"] }``: their schedule is the score strip, seq_strip.py, which the builder checked the plan makes for both),
against the NumPy reference; a call asking for flash, which only the longer boxes publish (cut from this bundle), is
refused, naming what is published."""

import re

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import ScalarArgumentError
from kernels.vit_attn.reference import attention, attention_qkv
from tests.hub.conftest import fetched_without_trust
from tests.hub.library_packages import ROOT, families_only


@pytest.fixture(scope="module")
def keywords_bundle(tmp_path_factory):
    """attention's and attention_qkv's families over S 1..512 in fp32 and their runtime-scale twins, B cut to 1..2
    and H to 1..4 (so calls past them stay small and run in parts)."""
    root = families_only("vit_attn", tmp_path_factory.mktemp("keywords"), {"attention", "attention_qkv"},
                         lambda ln: 'S = "1..512"' in ln and ("x D:float32" in ln or "x D):float32" in ln))  # fmt: skip
    toml = root / "kernel.toml"
    text = re.sub(r'H = "1\.\.\d+"', 'H = "1..4"', re.sub(r'B = "1\.\.\d+"', 'B = "1..2"', toml.read_text()))
    toml.write_text(text)
    bundle = build_bundle(root, benchmarks=False)
    assert len(bundle.manifest.ir_files()) == 4  # two families and their two twins
    return bundle


@pytest.fixture
def vit(registry, keywords_bundle):
    return fetched_without_trust(keywords_bundle, "acme/vit-attn")


def _close(out, expected):
    np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(expected, np.float64), rtol=2e-5, atol=2e-5)


def test_scale_and_strategy_run_without_trust(vit):
    rng = np.random.default_rng(21)
    for shape in [(2, 3, 100, 40), (3, 5, 70, 16)]:  # the second above the B and H ranges: in parts
        q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
        _close(vit.attention(q, k, v, scale=0.1, backend="numpy"), attention(q, k, v, 0.1))
        _close(vit.attention(q, k, v, strategy="resident", backend="numpy"), attention(q, k, v))
        _close(vit.attention(q, k, v, scale=0.1, strategy="resident", backend="numpy"), attention(q, k, v, 0.1))
        _close(vit.attention(q, k, v, 0.25, "auto", backend="numpy"), attention(q, k, v, 0.25))  # by position
    qkv = rng.standard_normal((2, 90, 3 * 3 * 24)).astype(np.float32)
    for kwargs in ({"scale": 0.1}, {"strategy": "resident"}, {"scale": -0.05, "strategy": "resident"}):
        _close(vit.attention_qkv(qkv, 3, backend="numpy", **kwargs), attention_qkv(qkv, 3, kwargs.get("scale")))


def test_a_call_with_a_scale_runs_the_twin_and_one_without_the_on_chip_default(vit):
    q = np.ones((1, 2, 10, 8), np.float32)
    assert "scale" not in vit.attention.route(q, q, q)[1].id
    assert vit.attention.route(q, q, q, scale=0.1)[1].id.endswith("__scale-float32")
    assert vit.attention.route(q, q, q, strategy="resident", scale=0.1)[1].id.endswith("__scale-float32")


def test_flash_where_only_the_strip_is_published_and_a_scale_float32_cannot_hold_are_refused(vit):
    q = np.ones((1, 2, 10, 8), np.float32)
    with pytest.raises(kernels.NoSpecialisationError, match=r"strategy='flash'\)[.]"):
        vit.attention(q, q, q, strategy="flash", backend="numpy")
    with pytest.raises(ScalarArgumentError, match="scale must be a real number float32 holds"):
        vit.attention(q, q, q, scale=1e40, backend="numpy")


def test_evict_naming_the_families_copy_engine_runs_without_trust(vit):
    """The families list ``evict = ["auto", ["scalar"]]``: their schedule copies P^T on the Scalar engine, so a call
    naming that engine (a tuple or a list) runs the family; one naming the Vector engine is not theirs."""
    rng = np.random.default_rng(22)
    q, k, v = (rng.standard_normal((2, 3, 70, 16)).astype(np.float32) for _ in range(3))
    for evict in (("scalar",), ["scalar"]):
        _close(vit.attention(q, k, v, evict=evict, backend="numpy"), attention(q, k, v))
        assert vit.attention.route(q, k, v, evict=evict, scale=0.1)[0] == "family"
    qkv = rng.standard_normal((3, 40, 3 * 5 * 8)).astype(np.float32)  # above B 1..2 and H 1..4: in parts
    _close(vit.attention_qkv(qkv, 5, evict=("scalar",), backend="numpy"), attention_qkv(qkv, 5, None))
    for evict in (("scalar", "vector"), ("vector",), "scalar"):
        with pytest.raises(kernels.NoSpecialisationError, match=r"evict in \['auto', \('scalar',\)\]"):
            vit.attention.route(q, k, v, evict=evict)


def _one_line(tmp_path, keep, edit):
    """vit-attn cut down to attention's one kernel.toml line ``keep`` accepts (concrete or a family), ``edit``ed."""
    root = families_only("vit_attn", tmp_path, {"attention"})
    toml = root / "kernel.toml"
    lines = (ROOT / "vit_attn" / "kernel.toml").read_text().split("\n")
    line = next(ln for ln in lines if ln.lstrip().startswith("{ args") and keep(ln))
    text = toml.read_text()
    at = text.index("specialisations = [\n") + len("specialisations = [\n")
    toml.write_text(text[:at] + edit(line) + "\n" + text[at:])
    return root


@pytest.mark.parametrize("keep, edit, refusal", [
    # a family over S listing an engine its schedule does not copy by: the plan refuses it
    (lambda ln: "B x H x S x D:float32" in ln and 'S = "1..512"' in ln and "scalars" not in ln,
     lambda ln: ln.replace('["auto", ["scalar"]]', '["auto", ["scalar", "vector"]]'),
     r"evict=\('scalar', 'vector'\) is listed, but the plan refuses it: .*copies P\^T from PSUM on the scalar"),
    # a model's shape (auto: three copies of four on the Scalar engine) listing all on the Scalar engine: another IR
    (lambda ln: ln.lstrip().startswith('{ args = ["1x2x197x64:float32"'),
     lambda ln: ln.replace('["scalar", "scalar", "vector", "scalar"]', '["scalar"]'),
     r"evict=\('scalar',\) makes another kernel call than evict='auto'"),
])  # fmt: skip
def test_the_builder_refuses_evict_values_the_schedule_does_not_run(tmp_path, keep, edit, refusal):
    from hub_client.errors import BundleError

    with pytest.raises(BundleError, match=refusal):
        build_bundle(_one_line(tmp_path, keep, edit), benchmarks=False)


def test_a_keyword_given_at_its_default_routes_as_one_left_out(vit):
    """The manifest records the plan's keyword defaults (``defaults``): ``scale=None`` is the on-chip 1 / sqrt(D),
    not the runtime-scale twin (which takes a number), and ``strategy="auto"``, ``evict="auto"`` are no keyword."""
    assert vit.info.trusted is False
    defaults = {"scale": None, "strategy": "auto", "evict": "auto"}
    rng = np.random.default_rng(23)
    q, k, v = (rng.standard_normal((2, 3, 50, 16)).astype(np.float32) for _ in range(3))
    left_out = vit.attention.route(q, k, v)[1].id
    for name, value in defaults.items():
        assert vit.attention.route(q, k, v, **{name: value})[1].id == left_out, name
    assert vit.attention.route(q, k, v, None, "auto", "auto")[1].id == left_out  # by position
    _close(vit.attention(q, k, v, scale=None, backend="numpy"), attention(q, k, v))
    qkv = rng.standard_normal((1, 30, 3 * 2 * 8)).astype(np.float32)
    _close(vit.attention_qkv(qkv, 2, scale=None, backend="numpy"), attention_qkv(qkv, 2, None))


def test_a_keyword_no_specialisation_takes_is_refused_naming_it_and_what_was_published(vit):
    q = np.ones((1, 2, 10, 8), np.float32)
    with pytest.raises(kernels.NoSpecialisationError, match=r"strategy='flash': no published specialisation takes "
                                                            r"strategy at that value; published: 'auto', 'resident'"):
        vit.attention(q, q, q, strategy="flash", backend="numpy")
    with pytest.raises(kernels.NoSpecialisationError, match=r"evict=\('tensor',\): no published specialisation takes "
                                                            r"evict at that value; published: 'auto', \('scalar',\)"):
        vit.attention(q, q, q, evict=("tensor",), backend="numpy")  # an engine name the kernel does not know
    with pytest.raises(kernels.NoSpecialisationError, match=r"schedule='tiled': no published specialisation takes "
                                                            r"schedule, which is no parameter of the entry point "
                                                            r"\(q, k, v, scale, strategy, evict\)"):
        vit.attention(q, q, q, schedule="tiled")
    long = "x" * 10_000  # a caller's value (or a manifest's) is quoted cut short
    with pytest.raises(kernels.NoSpecialisationError) as refused:
        vit.attention(q, q, q, strategy=long)
    assert "strategy='" + "x" * 64 + "'..." in str(refused.value) and len(str(refused.value)) < 4000
