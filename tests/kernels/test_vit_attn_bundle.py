"""vit-attn as a Hub package: kernel.toml declares the issue's shape table (batch 1 and 8, bf16 and fp32, both
entry points; the split layout at the ViT-B/16 shapes), and a bundle carries the modelled comparison with the
eager baseline per specialisation and target.

Building the full bundle traces and models 50 specialisations on three targets (minutes); the bundle test builds
a copy of the package whose kernel.toml keeps two specialisations per entry point (the test-vector one and
ViT-B/16 batch 1 bf16), with the same [benchmarks] section."""

import json
import shutil
from pathlib import Path

from hub_client.bundle import build_bundle
from hub_client.package import read_package
from tests.backend_fixture import backend_independent
from tests.kernels.test_vit_attn import TABLE

PACKAGE = Path(__file__).parents[2] / "kernels" / "vit_attn"


@backend_independent
def test_manifest_declares_the_table():
    pkg = read_package(PACKAGE)
    eps = {e.name: e for e in pkg.entry_points}
    assert set(eps) == {"attention", "attention_qkv", "attention_split"}
    qkv = {(s.args[0].shape, s.args[0].dtype, dict(s.constants)["num_heads"])
           for s in eps["attention_qkv"].specialisations if not s.keywords}  # (the per-head views bind num_heads)
    bhsd = {(s.args[0].shape, s.args[0].dtype) for s in eps["attention"].specialisations}
    for _, seq, heads, d in TABLE:
        for batch in (1, 8):
            for dtype in ("bfloat16", "float32"):
                assert ((batch, seq, 3 * heads * d), dtype, heads) in qkv
                assert ((batch, heads, seq, d), dtype) in bhsd
    assert pkg.baseline == "baseline:eager_attention" and pkg.benchmark_targets == ("trn1", "trn2", "trn3")


def _subset(tmp_path):
    root = tmp_path / "vit_attn"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    lines = (root / "kernel.toml").read_text().splitlines()
    keep = [ln for ln in lines if "args = [" not in ln or "test vectors" in ln
            or ("ViT-B/16 batch 1" in ln and "bfloat16" in ln) or "ViT-B/16 b1" in ln]  # fmt: skip
    (root / "kernel.toml").write_text("\n".join(keep) + "\n")
    return root


@backend_independent
def test_bundle_carries_the_comparison(tmp_path):
    root = _subset(tmp_path)
    bundle = build_bundle(root)
    manifest = json.loads(bundle.files["manifest.json"])
    assert manifest["benchmarks"]["comparison"] == "benchmarks/comparison.json"
    assert "one kernel per framework op" in manifest["benchmarks"]["baseline"]
    figures = json.loads(bundle.files["benchmarks/comparison.json"])
    specs = {f"{e}/{s['id']}" for e, ep in manifest["entry_points"].items() for s in ep["specialisations"]}
    assert set(figures) == specs and len(specs) >= 4
    for per_target in figures.values():
        assert set(per_target) == {"trn1", "trn2", "trn3"}
        for f in per_target.values():
            assert f["latency_us"] > 0 and f["baseline_us"] > 0
            assert abs(f["speedup"] - f["baseline_us"] / f["latency_us"]) < 1e-2
            assert f["binding_engine"] in ("tensor", "vector", "scalar", "gpsimd", "dma")
    # the small fp32 specialisations carry test vectors that the builder checked against the reference
    vectors = [s["test_vectors"] for ep in manifest["entry_points"].values() for s in ep["specialisations"]]
    assert sum(v is not None for v in vectors) == 2
    # and HF kernels' variant: the attention against AWS's current nki, under HF's kebab-case name
    meta = json.loads(bundle.files["build/torch-neuron/metadata.json"])
    assert (meta["name"], meta["version"], meta["python-depends"]) == ("vit-attn", 1, ["nki"])
    assert meta["id"].startswith("_vit_attn_neuron_") and set(meta["digest"]["files"]) == {"__init__.py",
                                                                                         "attention.py"}
