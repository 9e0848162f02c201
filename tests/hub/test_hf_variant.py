"""The HF kernels variant in every release: ``build/torch-neuron/`` with HF's metadata, digest and entry module.

HF kernels' own parser and hasher check the same files in ``tests/hub/test_hf_kernels.py`` (a throwaway venv);
these checks need nothing but the bundle.
"""

import ast
import base64
import hashlib
import json
import shutil

import pytest

from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from hub_client.hf_variant import PREFIX, variant_files
from hub_client.package import read_package
from tests.hub.conftest import RMSNORM, ROOT, SOFTMAX

LAYERNORM, VIT_ATTN, LINEAR = (ROOT / "kernels" / name for name in ("layernorm", "vit_attn", "linear"))


def _variant(bundle) -> dict[str, bytes]:
    return {p.removeprefix(PREFIX): d for p, d in bundle.files.items() if p.startswith(PREFIX)}


@pytest.mark.parametrize("package", [SOFTMAX, RMSNORM, LAYERNORM], ids=["softmax", "rmsnorm", "layernorm"])
def test_release_carries_the_neuron_variant_with_hf_metadata(package):
    bundle = build_bundle(package, benchmarks=False)
    files = _variant(bundle)
    name = read_package(package).name
    assert {"__init__.py", "metadata.json", f"{name}.py"} <= set(files)
    meta = json.loads(files["metadata.json"])
    assert meta["name"] == name and meta["version"] == 1 and meta["license"] == "apache-2.0"
    assert meta["python-depends"] == ["nki"] and meta["backend"] == {"type": "neuron"}
    assert meta["id"].startswith(f"_{name}_neuron_") and meta["id"].isidentifier()
    # HF's digest: every variant file but the top-level metadata.json, sha256, standard base64, relative paths.
    expected = {p: base64.b64encode(hashlib.sha256(d).digest()).decode() for p, d in files.items()
                if p != "metadata.json"}  # fmt: skip
    assert meta["digest"] == {"algorithm": "sha256", "files": expected}
    # Beside the IR and this project's manifest, which digests the variant too.
    assert all(bundle.manifest.files[PREFIX + p] == hashlib.sha256(d).hexdigest() for p, d in files.items())
    assert bundle.manifest.ir_files()


@pytest.mark.parametrize("package", [SOFTMAX, RMSNORM, LAYERNORM, VIT_ATTN, LINEAR],
                         ids=["softmax", "rmsnorm", "layernorm", "vit_attn", "linear"])  # fmt: skip
def test_variant_python_imports_the_real_nki_only(package):
    """The variant runs under HF kernels on a Trainium machine: it imports AWS's ``nki`` (current API) and its own
    sibling modules, never this project's packages."""
    files = {p.removeprefix(PREFIX): d for p, d in variant_files(read_package(package)).items()}
    imported = set()
    for path, data in files.items():
        if not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(data)):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module)
    assert imported == {"nki", "nki.isa", "nki.language"}


def test_variant_id_changes_with_the_code(tmp_path):
    copy = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = json.loads(_variant(build_bundle(copy, benchmarks=False))["metadata.json"])["id"]
    with open(copy / "neuron" / "softmax.py", "a") as f:
        f.write("# changed\n")
    after = json.loads(_variant(build_bundle(copy, benchmarks=False))["metadata.json"])["id"]
    assert before != after  # HF keys loaded modules by id: two builds must not share one


def test_neuron_section_is_checked(tmp_path):
    copy = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, copy, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (copy / "kernel.toml").read_text()
    (copy / "kernel.toml").write_text(toml.replace('"neuron/__init__.py", ', ""))
    with pytest.raises(BundleError, match=r"neuron/__init__.py"):
        read_package(copy)
    (copy / "kernel.toml").write_text(toml.replace('"neuron/softmax.py"', '"kernel.py"'))
    with pytest.raises(BundleError, match=r"not an existing file under neuron/"):
        read_package(copy)


def test_every_first_party_kernel_package_publishes_the_variant():
    packages = sorted(p.parent for p in (ROOT / "kernels").glob("*/kernel.toml"))
    assert {p.name for p in packages} >= {"layernorm", "linear", "matmul", "rmsnorm", "softmax", "vit_attn"}
    for package in packages:
        assert "neuron/__init__.py" in read_package(package).neuron_files, package.name
