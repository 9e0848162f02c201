"""Bundles: deterministic, every file digested, IR verified and round-tripping, test vectors reproduced by the IR."""

import json
import re

import numpy as np
import pytest

import nki_dsl as nki
from hub_client import execute
from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from hub_client.manifest import MANIFEST, sha256_hex
from hub_client.npz import load_npz
from tests.hub.conftest import RMSNORM, SOFTMAX


def test_same_package_same_bytes(softmax_bundle):
    assert build_bundle(SOFTMAX, benchmarks=False).files == softmax_bundle.files


def test_manifest_digests_every_other_file(softmax_bundle):
    m = softmax_bundle.manifest
    assert set(m.files) == set(softmax_bundle.files) - {MANIFEST}
    for path, digest in m.files.items():
        assert sha256_hex(softmax_bundle.files[path]) == digest
    assert m.digest == sha256_hex(softmax_bundle.files[MANIFEST])
    assert m.version == "1.0.0" and m.major == 1
    assert json.loads(softmax_bundle.files[MANIFEST])["benchmarks"]["status"] == "skipped"


def test_ir_is_verified_relocated_and_round_trips(softmax_bundle):
    for spec in softmax_bundle.manifest.entry_points["softmax"].specialisations:
        text = softmax_bundle.files[spec.ir].decode()
        assert re.search(r'source "src/softmax/(kernel|widths)\.py"', text) and '"/' not in text  # no machine paths
        parsed = nki.parse_family(text) if spec.is_family else nki.parse_ir(text)
        assert parsed.text == text
        if spec.is_family:  # what was shipped is proved for its whole range, as publishing proved it
            nki.prove_family(parsed, "trn2")
            assert {n: (*r, 1)[:3] for n, r in parsed.dims.items()} == spec.dims  # the manifest's (lo, hi, step)


def _verified_ir(bundle, spec, args):
    text = bundle.files[spec.ir].decode()
    return nki.parse_family(text).instantiate(*args, target="trn2") if spec.is_family else nki.parse_ir(text)


@pytest.mark.parametrize("package", [SOFTMAX, RMSNORM, SOFTMAX.parent / "matmul"], ids=["softmax", "rmsnorm", "matmul"])
def test_test_vectors_reproduce_from_the_ir(package):
    bundle = build_bundle(package, benchmarks=False)
    checked = 0
    for ep in bundle.manifest.entry_points.values():
        for spec in ep.specialisations:
            if spec.test_vectors is None:
                continue
            v = load_npz(bundle.files[spec.test_vectors])
            args = [v[f"arg{i}"] for i in range(len(spec.args) + len(spec.scalars))]  # runtime scalars follow
            ir = _verified_ir(bundle, spec, args)
            out = execute.compile_ir(ir, "numpy", "trn2").run(dict(zip(execute.param_names(ir), args)))
            rtol, atol = v["tolerance"]
            np.testing.assert_allclose(out.astype(np.float64), v["expected"].astype(np.float64), rtol=rtol, atol=atol)
            checked += 1
    assert checked >= 2


def test_version_override_keeps_the_major():
    assert build_bundle(SOFTMAX, "1.4.2", benchmarks=False).manifest.version == "1.4.2"
    with pytest.raises(BundleError, match="major"):
        build_bundle(SOFTMAX, "2.0.0", benchmarks=False)
    with pytest.raises(BundleError, match="MAJOR.MINOR.PATCH"):
        build_bundle(SOFTMAX, "1.0", benchmarks=False)


def test_modelled_benchmarks_when_the_simulator_exists():
    if "simulator" not in execute.available_backends():
        bundle = build_bundle(SOFTMAX)
        assert json.loads(bundle.files[MANIFEST])["benchmarks"]["status"] == "skipped"
        return
    bundle = build_bundle(SOFTMAX)
    figures = json.loads(bundle.files["benchmarks/modelled.json"])
    assert set(figures) == {f"softmax/{s.id}" for s in bundle.manifest.entry_points["softmax"].specialisations}
    assert all(f["latency_ns"] > 0 for f in figures.values())


def test_a_package_without_a_version_is_refused_naming_the_form(tmp_path):
    import shutil

    from hub_client.package import read_package

    pkg = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    toml = pkg / "kernel.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"\n', "", 1))
    with pytest.raises(BundleError, match=r"^version '': expected MAJOR.MINOR.PATCH, e.g. 1.0.0$"):
        read_package(pkg)


def test_a_manifest_nested_past_the_json_reader_is_a_bundle_error():
    # json's decoder recurses per level: a deep [[[[...]]]] manifest from the network was a RecursionError
    from hub_client.errors import BundleError
    from hub_client.manifest import parse

    with pytest.raises(BundleError, match="nested deeper than the JSON reader goes"):
        parse(b"[" * 100_000 + b"]" * 100_000)


def test_a_manifest_with_an_integer_past_python_s_digit_limit_is_a_bundle_error():
    # json.loads raises a plain ValueError (not JSONDecodeError) for an integer of more than 4,300 digits
    from hub_client.errors import BundleError
    from hub_client.manifest import parse

    with pytest.raises(BundleError, match="not valid JSON .*Exceeds the limit"):
        parse(b'{"format": ' + b"1" * 5000 + b"}")


BASELINE = '''def two_passes(entry, specs, constants, target):
    """Two passes over the rows at 0.1 B/ns: the figure a family's comparison is checked against.

    Only the first paragraph goes into the manifest."""
    (x,) = specs
    return 2 * x.shape[0] * x.shape[1] * 4 / 100.0 / 1000.0  # microseconds
'''


def _softmax_with(tmp_path, specialisations: str):
    """A copy of the softmax package whose only specialisations are ``specialisations`` (kernel.toml lines)."""
    import shutil

    pkg = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    toml = pkg / "kernel.toml"
    text = toml.read_text()
    start = text.index("specialisations = [")
    end = text.index("]\n", text.index("\n]", start)) + 2
    toml.write_text(text[:start] + f"specialisations = [\n{specialisations}]\n" + text[end:])
    return pkg


def _family_with_baseline(tmp_path):
    """softmax with one family, N x 512 float32 for N in 1..1000 (inputs of 300 rows and more are past the test
    vectors' limit), and a [benchmarks] baseline."""
    pkg = _softmax_with(tmp_path, '    { args = ["N x 512:float32"], dims = { N = "1..1000" } },\n')
    toml = pkg / "kernel.toml"
    toml.write_text(toml.read_text() + '\n[benchmarks]\nbaseline = "baseline:two_passes"\ntargets = ["trn1", "trn2"]\n')
    (pkg / "baseline.py").write_text(BASELINE)
    return pkg


def test_a_concrete_specialisation_s_modelled_figures_are_its_own_profile(tmp_path):
    from kernels.softmax.launcher import softmax_kernel

    if "simulator" not in execute.available_backends():
        pytest.skip("the figures are modelled on the simulator")
    bundle = build_bundle(_softmax_with(tmp_path, '    { args = ["256x512:float32"] },\n'))
    ((spec,),) = [ep.specialisations for ep in bundle.manifest.entry_points.values()]
    assert not spec.is_family
    figures = json.loads(bundle.files["benchmarks/modelled.json"])[f"softmax/{spec.id}"]
    profile = nki.benchmark(softmax_kernel, nki.spec((256, 512), "float32"), target="trn2")
    assert figures["latency_ns"] == round(profile.latency_ns, 3) > 0
    assert figures["hbm_bytes"] == profile.hbm_bytes >= 2 * 256 * 512 * 4  # (read once, written once, at least)
    assert "at" not in figures  # a family's figures say at which sample; a concrete one has one size


def test_a_family_is_compared_with_the_baseline_at_its_largest_sample_that_fits(tmp_path):
    from hub_client.bundle import MAX_TEST_VECTOR_ELEMENTS
    from kernels.softmax.launcher import softmax_kernel

    if "simulator" not in execute.available_backends():
        pytest.skip("the comparison is modelled on the simulator")
    bundle = build_bundle(_family_with_baseline(tmp_path))
    manifest = json.loads(bundle.files[MANIFEST])
    (spec,) = manifest["entry_points"]["softmax"]["specialisations"]
    assert manifest["benchmarks"]["baseline"] == ("Two passes over the rows at 0.1 B/ns: the figure a family's "
                                                  "comparison is checked against.")  # fmt: skip
    # 300 rows of 512 are past the vectors' limit, 200 are not: the ragged sample is 200 rows, and the last sample
    assert 300 * 512 > MAX_TEST_VECTOR_ELEMENTS >= 200 * 512
    vectors = load_npz(bundle.files[spec["test_vectors"]])
    assert vectors["arg0"].shape == (200, 512)
    assert json.loads(bundle.files["benchmarks/modelled.json"])[f"softmax/{spec['id']}"]["at"] == {"N": 200}
    ((key, figures),) = json.loads(bundle.files["benchmarks/comparison.json"]).items()
    assert key == f"softmax/{spec['id']}" and set(figures) == {"trn1", "trn2"}
    for target, f in figures.items():  # each target's own modelled latency, at the 200-row sample
        modelled = nki.benchmark(softmax_kernel, nki.spec((200, 512), "float32"), target=target).latency_us
        assert f["latency_us"] == round(modelled, 3)
        assert f["baseline_us"] == round(2 * 200 * 512 * 4 / 100.0 / 1000.0, 3)  # the baseline saw 200 x 512
        assert f["latency_us"] > 0 and abs(f["speedup"] - f["baseline_us"] / f["latency_us"]) < 1e-2
    assert figures["trn1"]["latency_us"] != figures["trn2"]["latency_us"]
