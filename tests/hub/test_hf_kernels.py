"""Hugging Face ``kernels`` 0.17.2 itself (a throwaway venv, see ``hf_venv``) against releases published here, on
the local registry: ``kernels versions``, ``kernels lock`` / ``kernels download``, ``install_kernel`` and
``get_kernel`` on a simulated Neuron machine, and lock files both ways.

Slow (the first run creates the venv and installs kernels 0.17.2 with pip; later runs reuse it from pytest's cache):
``pytest -m slow tests/hub/test_hf_kernels.py``.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import kernels
from hub_client.projects import lock_project
from hub_client.publish import publish
from kernels.softmax import softmax_reference
from tests.hub import hf_venv
from tests.hub.conftest import ROOT, TRUSTED_ORG, settings

pytestmark = pytest.mark.slow
REPO = f"{TRUSTED_ORG}/softmax"  # a trusted publisher: HF kernels loads it without trust_remote_code


@pytest.fixture(scope="session")
def hf_python(request, tmp_path_factory) -> Path:
    cache = request.config.cache
    root = cache.mkdir(f"hf-kernels-{hf_venv.HF_KERNELS}-venv") if cache else tmp_path_factory.mktemp("hf-venv")
    return hf_venv.ensure_venv(Path(root))


@pytest.fixture
def published(registry, softmax_bundle):
    return publish(softmax_bundle, REPO, settings())


@pytest.fixture
def neuron(tmp_path) -> Path:
    return hf_venv.neuron_machine(tmp_path / "neuron-machine")


def _project(directory: Path) -> Path:
    directory.mkdir()
    (directory / "pyproject.toml").write_text(f'[project]\nname = "app"\n\n[tool.kernels.dependencies]\n"{REPO}" = 1\n')
    return directory


def test_kernels_versions_lists_the_neuron_variant(hf_python, published, tmp_path, neuron):
    cpu = hf_venv.run(hf_python, ["kernels", "versions", REPO], tmp_path).stdout
    assert "Version 1:" in cpu and "torch-neuron:" in cpu  # listed, and rejected on a CPU machine (with the reason)
    trn = hf_venv.run(hf_python, ["kernels", "versions", REPO], tmp_path, pythonpath=[neuron]).stdout
    assert "torch-neuron compatible, preferred" in trn


def test_lock_files_both_ways(hf_python, published, tmp_path, neuron):
    theirs, ours = _project(tmp_path / "theirs"), _project(tmp_path / "ours")
    hf_venv.run(hf_python, ["kernels", "lock", str(theirs)], tmp_path)
    locked = lock_project(ours)
    # Same [tool.kernels.dependencies] input, the same kernels.lock: HF's own bytes.
    assert (ours / "kernels.lock").read_bytes() == (theirs / "kernels.lock").read_bytes()
    assert json.loads((theirs / "kernels.lock").read_text())[0]["lock"]["commit"] == published.commit
    assert locked[0].digest == published.digest  # this project's manifest digest, in the sidecar
    # HF accepts this project's lock: `kernels download` parses it strictly and fetches the variant.
    done = hf_venv.run(hf_python, ["kernels", "download", str(ours)], tmp_path, pythonpath=[neuron])
    assert f"Downloading kernel: {REPO} (revision: {published.commit})" in done.stderr
    snapshot = settings().snapshot_dir(REPO, published.commit)
    assert (snapshot / "build" / "torch-neuron" / "__init__.py").is_file()
    # This project accepts HF's lock (no sidecar): pinned by commit, every file checked against the manifest there.
    k = kernels.get_locked_kernel(REPO, lockfile=theirs / "kernels.lock")
    assert (k.info.commit, k.info.digest) == (published.commit, published.digest)
    x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_allclose(k.softmax(x), softmax_reference(x), rtol=1e-5, atol=1e-7)


def test_install_kernel_fetches_the_variant_and_its_digest_verifies(hf_python, published, tmp_path, neuron):
    script = f"""
import json, kernels
from kernels._rust import Digest, Metadata
path = kernels.install_kernel({REPO!r}, version=1)
meta = Metadata.read_from_file(path / "metadata.json")
meta.digest.validate(Digest.hash_variant(meta.digest.algorithm, path))  # what verify_variant checks after the signature
print(json.dumps({{"variant": path.name, "deps": meta.python_depends, "backend": str(meta.backend.backend_type),
                   "version": meta.version, "id": meta.id, "files": sorted(meta.digest.files)}}))
"""
    out = json.loads(hf_venv.run(hf_python, ["-c", script], tmp_path, pythonpath=[neuron]).stdout.splitlines()[-1])
    assert out["variant"] == "torch-neuron" and out["deps"] == ["nki"] and out["version"] == 1
    assert out["backend"] == "neuron" and out["id"].startswith("_softmax_neuron_")
    assert out["files"] == ["__init__.py", "softmax.py"]


def test_get_kernel_without_nki_names_the_missing_dependency(hf_python, published, tmp_path, neuron):
    """HF resolves the release to the neuron variant, parses its metadata and refuses before importing anything:
    the venv has no ``nki``."""
    script = f"import kernels\nkernels.get_kernel({REPO!r}, version=1)\n"
    done = hf_venv.run(hf_python, ["-c", script], tmp_path, pythonpath=[neuron], check=False)
    assert done.returncode != 0 and "requires Python dependency `nki`" in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("nki_dsl.compat") is None,
                    reason="needs nki_dsl.compat.install() (the current-API front end that makes `import nki` resolve "
                           "to nki-dsl), which is not on main yet")  # fmt: skip
def test_get_kernel_imports_the_variant_with_nki_from_nki_dsl(hf_python, published, tmp_path, neuron):
    shim = tmp_path / "nki-from-nki-dsl"
    shim.mkdir()
    (shim / "nki_dsl").symlink_to(ROOT / "nki_dsl")  # only nki_dsl: HF's `kernels` stays the one imported
    # Appended after the HF venv's own packages, so its kernels and huggingface_hub win; numpy & co. come from here.
    purelib = sysconfig.get_paths()["purelib"]
    (shim / "sitecustomize.py").write_text(
        f"import sys\nsys.path.append({purelib!r})\nimport nki_dsl.compat\nnki_dsl.compat.install()\n"
    )
    script = f"""
import json, numpy as np, kernels
k = kernels.get_kernel({REPO!r}, version=1)
x = np.random.default_rng(0).standard_normal((300, 512)).astype(np.float32)
print(json.dumps({{"module": k.__name__, "y": np.asarray(k.softmax(x)).tolist()}}))
"""
    done = hf_venv.run(hf_python, ["-c", script], tmp_path, pythonpath=[neuron, shim])
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["module"].startswith("_softmax_neuron_")
    x = np.random.default_rng(0).standard_normal((300, 512)).astype(np.float32)
    np.testing.assert_allclose(np.array(out["y"], np.float32), softmax_reference(x), rtol=1e-5, atol=1e-6)


def test_signatures_accept_every_call_the_installed_hf_kernels_accepts(hf_python, tmp_path):
    names = sorted(("get_kernel", "has_kernel", "install_kernel", "get_locked_kernel", "load_kernel",
                    "get_local_kernel"))  # fmt: skip
    script = f"""
import inspect, json, kernels
print(json.dumps({{n: [[p.name, p.kind.name, p.default is inspect.Parameter.empty, repr(p.default)]
                       for p in inspect.signature(getattr(kernels, n)).parameters.values()] for n in {names!r}}}))
"""
    theirs = json.loads(hf_venv.run(hf_python, ["-c", script], tmp_path).stdout.splitlines()[-1])
    for name, params in theirs.items():
        ours = inspect.signature(getattr(kernels, name)).parameters
        for position, (param, kind, required, default) in enumerate(params):
            if kind == "POSITIONAL_OR_KEYWORD":
                assert list(ours)[position] == param, (name, param)
            assert ours[param].kind.name == kind, (name, param)
            if not required:  # an HF default is ours too; a keyword HF requires may have a default here
                assert repr(ours[param].default) == default, (name, param)
