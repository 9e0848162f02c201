"""vit-attn's keywords without trust: a fetched vit-attn (no ``trust_remote_code``) runs ``scale=`` (any value: the
runtime-scale twins of the families over S take it as a one-element float32 array, kernel.toml's required
``scalars``) and ``strategy="flash"`` / ``"auto"`` (the families' ``constants = { strategy = ["auto", "flash"] }``:
their schedule is flash, which the builder checked the plan makes for both), against the NumPy reference; a call
asking for the resident strip is refused, naming what is published."""

import re

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import ScalarArgumentError
from kernels.vit_attn.reference import attention, attention_qkv
from tests.hub.conftest import fetched_without_trust
from tests.hub.library_packages import families_only


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
        _close(vit.attention(q, k, v, strategy="flash", backend="numpy"), attention(q, k, v))
        _close(vit.attention(q, k, v, scale=0.1, strategy="flash", backend="numpy"), attention(q, k, v, 0.1))
        _close(vit.attention(q, k, v, 0.25, "auto", backend="numpy"), attention(q, k, v, 0.25))  # by position
    qkv = rng.standard_normal((2, 90, 3 * 3 * 24)).astype(np.float32)
    for kwargs in ({"scale": 0.1}, {"strategy": "flash"}, {"scale": -0.05, "strategy": "flash"}):
        _close(vit.attention_qkv(qkv, 3, backend="numpy", **kwargs), attention_qkv(qkv, 3, kwargs.get("scale")))


def test_a_call_with_a_scale_runs_the_twin_and_one_without_the_on_chip_default(vit):
    q = np.ones((1, 2, 10, 8), np.float32)
    assert "scale" not in vit.attention.route(q, q, q)[1].id
    assert vit.attention.route(q, q, q, scale=0.1)[1].id.endswith("__scale-float32")
    assert vit.attention.route(q, q, q, strategy="flash", scale=0.1)[1].id.endswith("__scale-float32")


def test_the_resident_strip_and_a_scale_float32_cannot_hold_are_refused(vit):
    q = np.ones((1, 2, 10, 8), np.float32)
    with pytest.raises(kernels.NoSpecialisationError, match=r"strategy='resident'\)[.]"):
        vit.attention(q, q, q, strategy="resident", backend="numpy")
    with pytest.raises(ScalarArgumentError, match="scale must be a real number float32 holds"):
        vit.attention(q, q, q, scale=1e40, backend="numpy")
