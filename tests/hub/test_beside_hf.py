"""nki-dsl and Hugging Face ``kernels`` in one environment: neither replaces a file of the other.

The slow test builds nki-dsl's wheel and installs it into a fresh venv that already has HF kernels 0.17.2 (pip
from the configured index); the others check, in this process, what a source checkout's ``kernels`` says.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import venv
import warnings

import pytest

import hub_client
import kernels
from hub_client.publish import publish
from kernels import _distribution
from tests.hub import hf_venv
from tests.hub.conftest import ROOT, TRUSTED_ORG, settings


def test_the_api_is_reachable_under_hub_client():
    for name in kernels.__all__:
        if name != "other_distribution":
            assert getattr(hub_client, name) is getattr(kernels, name), name
    assert set(hub_client.__all__) <= set(kernels.__all__)
    assert kernels.__distribution__ == "nki-dsl"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        hub_client.nothing  # noqa: B018


def test_hf_only_names_say_whose_kernels_this_is(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(AttributeError) as e:
        kernels.kernelize  # noqa: B018
    assert "kernels.kernelize is Hugging Face kernels' API; this `kernels` is nki-dsl's" in str(e.value)
    assert "Hugging Face's kernels is not installed here" in str(e.value)
    (tmp_path / "kernels-0.17.2.dist-info").mkdir()  # HF's distribution, as pip installs it
    assert kernels.other_distribution() == str(tmp_path / "kernels-0.17.2.dist-info")
    with pytest.raises(AttributeError, match=r"is installed \(.*kernels-0.17.2.dist-info\) but this nki-dsl source"):
        kernels.LayerRepository  # noqa: B018
    with pytest.warns(UserWarning, match=r"`import kernels` gave nki-dsl's kernels .*, not Hugging Face's"):
        _distribution.warn_if_shadowing(kernels.__file__)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nowhere")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _distribution.warn_if_shadowing(kernels.__file__)  # nothing to shadow: silent


def _record(site, dist_glob: str) -> set[str]:
    (record,) = site.glob(f"{dist_glob}/RECORD")
    return {line.split(",")[0] for line in record.read_text().splitlines() if line}


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_both_installed_in_one_venv(tmp_path, registry, softmax_bundle):
    env_dir = tmp_path / "mixed"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"kernels=={hf_venv.HF_KERNELS}"], check=True, capture_output=True, cwd=tmp_path)
    (site,) = (env_dir / "lib").glob("python3*/site-packages")
    hf_init, hf_command = site / "kernels" / "__init__.py", env_dir / "bin" / "kernels"
    before = (_sha(hf_init), _sha(hf_command))
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheel_dir), str(ROOT)],
                   check=True, capture_output=True, cwd=tmp_path)  # fmt: skip
    (wheel,) = wheel_dir.glob("nki_dsl-*.whl")
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True, cwd=tmp_path)
    # Nothing replaced: the two distributions install disjoint sets of files, and HF's are byte for byte as before.
    ours, theirs = _record(site, "nki_dsl-*.dist-info"), _record(site, "kernels-*.dist-info")
    assert not (ours & theirs)
    assert "kernels/__init__.py" in theirs and "kernels/softmax/__init__.py" in ours
    assert (_sha(hf_init), _sha(hf_command)) == before
    assert (env_dir / "bin" / "nki-kernels").is_file()

    publish(softmax_bundle, f"{TRUSTED_ORG}/softmax", settings())
    script = f"""
import json, numpy as np, kernels, kernels.softmax, hub_client
k = hub_client.get_kernel({TRUSTED_ORG + "/softmax"!r}, version=1)
x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
err = float(np.abs(k.softmax(x) - kernels.softmax.softmax_reference(x)).max())
print(json.dumps({{"kernels": kernels.__version__, "get_kernel": kernels.get_kernel.__module__,
                   "softmax": kernels.softmax.__file__, "err": err}}))
"""
    out = json.loads(hf_venv.run(python, ["-c", script], tmp_path).stdout.splitlines()[-1])
    assert out["kernels"] == hf_venv.HF_KERNELS and out["get_kernel"] == "kernels.load"  # `kernels` is HF's
    assert out["softmax"] == str(site / "kernels" / "softmax" / "__init__.py") and out["err"] < 1e-6
    assert "publish" in hf_venv.run(env_dir / "bin" / "nki-kernels", ["--help"], tmp_path).stdout

    # Uninstalling nki-dsl leaves HF kernels whole (and takes only nki-dsl's files with it).
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "nki-dsl"], check=True, capture_output=True)
    assert (_sha(hf_init), _sha(hf_command)) == before and not (site / "kernels" / "softmax").exists()
    check = "import kernels; print(kernels.__version__, kernels.get_kernel.__module__)"
    assert hf_venv.run(python, ["-c", check], tmp_path).stdout.split() == [hf_venv.HF_KERNELS, "kernels.load"]
