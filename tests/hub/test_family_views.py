"""Families whose arrays the loader views per head (``args = ["B x S x (3 x H x D):float32"]``, a keyword giving a
dimension, ``returns`` merging the output back): vit-attn's ``attention_qkv`` and ``attention_split`` fetched
without trust run head counts, head dims, batches and sequence lengths nobody declared, above the families' batch
and head ranges as instances over slices, against the NumPy reference; the new manifest fields are refused when
hostile, with bounded messages."""

import json
import re

import numpy as np
import pytest

import kernels
from hub_client.bundle import Bundle, build_bundle
from hub_client.errors import BundleError
from hub_client.manifest import MANIFEST, dump, parse
from kernels.vit_attn.reference import attention_qkv as qkv_reference
from kernels.vit_attn.reference import attention_split as split_reference
from tests.hub.conftest import fetched_without_trust
from tests.hub.library_packages import families_only


def _close(out, expected):
    np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(expected, np.float64), rtol=2e-5, atol=2e-5)


@pytest.fixture(scope="module")
def views_bundle(tmp_path_factory):
    """The two per-head families of S 1..512, fp32, their B range cut to 1..2 and H to 1..4 (so calls past them
    stay small)."""
    root = families_only("vit_attn", tmp_path_factory.mktemp("views"), {"attention_qkv", "attention_split"},
                         lambda ln: "head_views" in ln and 'S = "1..512"' in ln and ":float32" in ln
                         and "scalars" not in ln)  # fmt: skip
    toml = root / "kernel.toml"
    text, n = re.subn(r'B = "1\.\.\d+", S = "1\.\.512", H = "1\.\.\d+"', 'B = "1..2", S = "1..512", H = "1..4"',
                      toml.read_text())  # fmt: skip
    assert n == 2
    toml.write_text(text)
    return build_bundle(root, benchmarks=False)


@pytest.fixture
def vit(registry, views_bundle):
    return fetched_without_trust(views_bundle, "acme/vit-attn")


def test_attention_qkv_runs_any_head_count_and_head_dim_without_trust(vit):
    rng = np.random.default_rng(1)
    # (batch, seq, heads, head_dim): in range; 17 heads (no family had them) over 4 heads' range: 5 parts; B 3
    for b, s, h, d in [(2, 130, 3, 24), (1, 40, 17, 8), (3, 5, 6, 2), (1, 1, 1, 1)]:
        qkv = rng.standard_normal((b, s, 3 * h * d)).astype(np.float32)
        out = vit.attention_qkv(qkv, num_heads=h, backend="numpy")
        assert out.shape == (b, s, h * d)
        _close(out, qkv_reference(qkv, h))
        _close(vit.attention_qkv(qkv, h, backend="numpy"), out)  # num_heads by position


def test_attention_split_runs_any_batch_sequence_and_heads_without_trust(vit):
    rng = np.random.default_rng(2)
    for b, s, h, d, call in [(2, 70, 3, 16, {"seq": 70}), (3, 33, 5, 8, {"batch": 3}), (1, 129, 2, 64, {"batch": 1}),
                             (2, 9, 2, 4, {"seq": 9, "batch": 2})]:  # fmt: skip
        qkT = rng.standard_normal((2 * h * d, b * s)).astype(np.float32)
        v = rng.standard_normal((b * s, h * d)).astype(np.float32)
        out = vit.attention_split(qkT, v, num_heads=h, backend="numpy", **call)
        assert out.shape == (b * s, h * d)
        _close(out, split_reference(qkT, v, h, seq=s))


def test_a_call_the_view_cannot_bind_says_why(vit):
    qkv = np.zeros((1, 4, 3 * 2 * 8), np.float32)
    for kwargs, why in [({}, "holds dimensions H, D, which its size alone cannot tell apart; pass num_heads"),
                        ({"num_heads": 5}, "not a multiple of 15"), ({"num_heads": True}, "must be an int")]:
        with pytest.raises(kernels.NoSpecialisationError, match=re.escape(why)):
            vit.attention_qkv(qkv, backend="numpy", **kwargs)
    qkT, v = np.zeros((32, 10), np.float32), np.zeros((10, 16), np.float32)
    with pytest.raises(kernels.NoSpecialisationError, match="not a multiple of 4"):  # 10 tokens, seq 4
        vit.attention_split(qkT, v, num_heads=2, seq=4, backend="numpy")


def _spec(bundle, entry="attention_qkv"):
    raw = json.loads(bundle.files[MANIFEST])
    return raw, raw["entry_points"][entry]["specialisations"][0]


@pytest.mark.parametrize("field, value, why", [
    ("keywords", {"num_heads": "Q"}, "keywords must map at most 16"),
    ("keywords", {"x" * 100_000: "H"}, "keywords must map at most 16"),
    ("keywords", {f"k{i}": "H" for i in range(17)}, "keywords must map at most 16"),
    ("keywords", ["num_heads"], "keywords must map at most 16"),
    ("returns", ["B x S x (H x Q)"], "returns must be a list of at most 16"),
    ("returns", ["(" * 100_000], "returns must be a list of at most 16"),
    ("returns", ["B x ((S)) x H"], "returns must be a list of at most 16"),
    ("returns", "B x S", "returns must be a list of at most 16"),
    ("returns", ["B x 0 x H"], "returns must be a list of at most 16"),
    ("args", ["B x S x (3 x H x D:float32"], "argument spec"),
    ("args", ["(" * 100_000 + ":float32"], "argument spec"),
])  # fmt: skip
def test_the_manifest_refuses_hostile_view_fields(views_bundle, field, value, why):
    raw, spec = _spec(views_bundle)
    spec[field] = value
    with pytest.raises(BundleError, match=re.escape(why)) as e:
        parse(dump(raw))
    assert len(str(e.value)) < 400


def test_the_manifest_refuses_a_keyword_that_is_a_constant(views_bundle):
    raw, spec = _spec(views_bundle)
    spec["constants"] = {"num_heads": 3}
    with pytest.raises(BundleError, match="keywords must map"):
        parse(dump(raw))


def test_an_output_of_another_shape_than_returns_says_is_refused(registry, views_bundle, tmp_path):
    raw, spec = _spec(views_bundle)
    spec["returns"] = ["S x B x (H x D)"]  # the kernel's output is (B, S, H, D): not (S, B, H, D)
    bundle = Bundle(dict(views_bundle.files) | {MANIFEST: dump(raw)})
    k = kernels.get_local_kernel(bundle.write(tmp_path / "b"))
    with pytest.raises(kernels.IRRejectedError, match="is not the manifest's returns"):
        k.attention_qkv(np.zeros((2, 3, 6), np.float32), num_heads=1, backend="numpy")


@pytest.mark.parametrize("edit, why", [
    (('keywords = { num_heads = "H" }', 'keywords = { num_heads = "Q" }'), "keywords must map keywords"),
    (('returns = ["B x S x (H x D)"]', 'returns = ["B x S x (H x Q)"]'), "returns must be a list of shapes"),
    (('returns = ["B x S x (H x D)"]', 'returns = ["B x ((S)) x (H x D)"]'), "returns must be a list of shapes"),
    (('"B x S x (3 x H x D):float32"', '"B x S x (3 x H x D:float32"'), "argument spec"),
])  # fmt: skip
def test_kernel_toml_refuses_malformed_view_fields(tmp_path, edit, why):
    from hub_client.package import read_package

    root = families_only("vit_attn", tmp_path, {"attention_qkv"},
                         lambda ln: "head_views" in ln and 'S = "1..512"' in ln and ":float32" in ln
                         and "scalars" not in ln)  # fmt: skip
    toml = root / "kernel.toml"
    assert edit[0] in toml.read_text()
    toml.write_text(toml.read_text().replace(*edit))
    with pytest.raises(BundleError, match=re.escape(why)):
        read_package(root)
