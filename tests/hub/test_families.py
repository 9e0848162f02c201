"""Shape families from the Hub: softmax published as ``N x 512`` (N in 1..65536) runs a batch size nobody
pre-traced (256x512 float32) without trust, against the local registry; each concrete shape is instantiated and
verified once; calls outside the family are refused with the reason."""

import json
import sys

import numpy as np
import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from hub_client.manifest import MANIFEST, dump, sha256_hex
from hub_client.package import ArgSpec, parse_dims
from hub_client.publish import publish
from kernels.softmax.reference import softmax as softmax_reference
from tests.hub.conftest import RMSNORM, SOFTMAX, settings


@pytest.fixture
def published(registry, softmax_bundle):
    return publish(softmax_bundle, "acme/softmax", settings())


def test_an_unforeseen_batch_size_runs_without_trust(published):
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/softmax", version=1)
    assert k.info.trusted is False and k.module is None  # no published Python runs
    x = np.random.default_rng(3).standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_allclose(k.softmax(x), softmax_reference(x), rtol=1e-5, atol=1e-7)
    # another unforeseen size, and fp16 from its own family
    y = np.random.default_rng(4).standard_normal((1000, 512)).astype(np.float16)
    np.testing.assert_allclose(k.softmax(y).astype(np.float64), softmax_reference(y).astype(np.float64), rtol=1e-2,
                               atol=5e-4)  # fmt: skip
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


def test_each_concrete_shape_is_instantiated_once(published):
    k = kernels.get_kernel("acme/softmax", version=1)
    entry = k.softmax
    x = np.ones((300, 512), np.float32)
    entry(x)
    first = dict(entry._parsed)
    entry(x + 1)
    assert dict(entry._parsed) == first and len(first) == 1  # the same concrete kernel, verified once
    entry(np.ones((301, 512), np.float32))
    assert len(entry._parsed) == 2


def test_calls_outside_the_family_say_why(published):
    k = kernels.get_kernel("acme/softmax", version=1)
    # more rows than the range runs in parts of whole row tiles (tests/hub/test_row_kernels_untrusted.py)
    assert k.softmax.route(np.ones((70000, 512), np.float32))[0] == "parts"
    with pytest.raises(kernels.NoSpecialisationError) as e:
        k.softmax(np.ones((10, 9000), np.float32))
    msg = str(e.value)
    assert "dimension W = 9000 is outside the published range 4097..8192" in msg
    # above the range, and every row reads all of its columns: not run in parts, and why
    assert "W = 9000 is above 4097..8192 and cannot run in parts: the kernel is not independent along W" in msg, msg
    assert "softmax(N x 512:float32) with N in 1..65536" in msg and "trust_remote_code=True" in msg
    with pytest.raises(kernels.NoSpecialisationError):
        k.softmax(np.ones((8, 256), np.float64))  # a dtype no family has: not a near miss of any


def test_a_tampered_family_is_refused_at_instantiation(tmp_path, softmax_bundle):
    bundle_dir = softmax_bundle.write(tmp_path / "bundle")
    spec = softmax_bundle.manifest.entry_points["softmax"].specialisations[0]
    text = softmax_bundle.files[spec.ir].decode()
    # Drop the mask: well-formed family text, but rows past N are read for some N (here at N = 200).
    bad = text.replace(" mask[$N - d0 - 128*i0 >= 1]", "").encode()
    (bundle_dir / spec.ir).write_bytes(bad)
    manifest = json.loads((bundle_dir / MANIFEST).read_bytes())
    manifest["files"][spec.ir] = sha256_hex(bad)
    (bundle_dir / MANIFEST).write_bytes(dump(manifest))
    k = kernels.get_local_kernel(bundle_dir)
    with pytest.raises(kernels.IRRejectedError) as e:
        k.softmax(np.ones((200, 512), np.float32))
    assert spec.ir in str(e.value) and "N = 200" in str(e.value) and "out-of-bound" in str(e.value)
    k.softmax(np.ones((256, 512), np.float32))  # a multiple of the tile is in bounds even unmasked: it runs


def test_the_manifest_records_the_family(softmax_bundle):
    specs = softmax_bundle.manifest.entry_points["softmax"].specialisations
    rows, widths = {"N": (1, 65536, 1)}, {"N": (1, 65536, 1), "W": (1, 8192, 1)}
    assert [(tuple(map(str, s.args)), s.dims) for s in specs] == [
        (("N x 512:float32",), rows), (("N x 512:float16",), rows), (("N x W:float32",), widths | {"W": (1, 4096, 1)}),
        (("N x W:float32",), widths | {"W": (4097, 8192, 1)}), (("N x W:bfloat16",), widths),
        (("N x W:float16",), widths)]
    assert all((s.test_vectors is not None) == ("bfloat16" not in s.id) for s in specs)  # .npy has no bfloat16


def test_rmsnorm_publishes_families_with_its_constant_then_with_a_runtime_epsilon():
    bundle = build_bundle(RMSNORM, benchmarks=False)
    specs = bundle.manifest.entry_points["rmsnorm"].specialisations
    fixed, widths = specs[:3], specs[3:]
    assert all(s.dims == {"N": (1, 65536, 1)} and s.constants == {"epsilon": 1e-6} and not s.scalars for s in fixed)
    assert widths and all(set(s.dims) == {"N", "W"} and not s.constants for s in widths)
    assert all(s.scalars == {"epsilon": ("float32", 1e-6)} for s in widths)  # the plan's default
    for s in widths:  # the IR shows the scalar: the kernel's last parameter, one float32
        assert "%epsilon: f32[1] hbm) -> (%0)" in bundle.files[s.ir].decode().split("\n")[0]


@pytest.mark.parametrize("text, shape", [
    ("N x 512:float32", ("N", 512)), ("Nx512:float32", ("N", 512)), ("B x 197 x 2304:bfloat16", ("B", 197, 2304)),
    ("128x512:float32", (128, 512)),
])  # fmt: skip
def test_argument_specs_name_symbolic_dimensions(text, shape):
    assert ArgSpec.parse(text).shape == shape


@pytest.mark.parametrize("raw, message", [
    (None, "missing N"), ({"N": "1..4", "M": "1..2"}, "M not in args"), ({"N": "0..4"}, "1 <= LO <= HI"),
    ({"N": "9..4"}, "1 <= LO <= HI"), ({"N": "1-4"}, "must be"), ({"N": [1]}, "must be"),
    ({"N": "1..99999999999999"}, "must be"),
])  # fmt: skip
def test_dims_must_range_exactly_the_symbols(raw, message):
    with pytest.raises(BundleError, match=message):
        parse_dims(raw, (ArgSpec.parse("N x 512:float32"),), "kernel.toml")


def test_a_family_the_kernel_cannot_keep_symbolic_is_refused_at_publish(tmp_path):
    import shutil

    root = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, root, ignore=shutil.ignore_patterns("__pycache__"))
    launcher = (root / "launcher.py").read_text()  # the concrete kernel only: it sizes its tiles by the row length
    concrete = launcher.replace("return softmax_widths, (x,), {}", "return softmax_kernel, (x,), {}")
    assert concrete != launcher
    (root / "launcher.py").write_text(concrete)
    toml = (root / "kernel.toml").read_text()
    (root / "kernel.toml").write_text(toml.replace('"N x 512:float32"], dims = { N = "1..65536" }',
                                                   '"128 x C:float32"], dims = { C = "1..1024" }'))  # fmt: skip
    with pytest.raises(BundleError) as e:
        build_bundle(root, benchmarks=False)
    assert "shape family cannot be published" in str(e.value) and "dimension C" in str(e.value)
    assert "kernel.py:" in str(e.value)  # the kernel line that needs C concretely (nl.arange(num_cols))


def test_the_manifest_and_the_family_ir_must_both_admit_a_call(tmp_path, softmax_bundle):
    """The manifest's range picks the specialisation; the IR's own declared range is checked again when the family
    is bound, so a manifest that claims more than its IR does not widen what runs."""
    bundle_dir = softmax_bundle.write(tmp_path / "bundle")
    spec = softmax_bundle.manifest.entry_points["softmax"].specialisations[0]
    narrow = softmax_bundle.files[spec.ir].decode().replace("symbol $N in [1, 65536]", "symbol $N in [1, 100]")
    (bundle_dir / spec.ir).write_bytes(narrow.encode())
    manifest = json.loads((bundle_dir / MANIFEST).read_bytes())
    manifest["files"][spec.ir] = sha256_hex(narrow.encode())
    (bundle_dir / MANIFEST).write_bytes(dump(manifest))
    k = kernels.get_local_kernel(bundle_dir)
    k.softmax(np.ones((100, 512), np.float32))
    with pytest.raises(kernels.IRRejectedError, match=r"dimension N = 300 is outside the family's range 1\.\.100"):
        k.softmax(np.ones((300, 512), np.float32))


def _family_record_edited(softmax_bundle, **changes) -> bytes:
    """The bundle's manifest bytes with these keys of its first family record set."""
    manifest = json.loads(softmax_bundle.files[MANIFEST])
    record = next(s for s in manifest["entry_points"]["softmax"]["specialisations"] if s.get("dims"))
    record.update(changes)
    return dump(manifest)


@pytest.mark.parametrize("changes, message", [
    # a hostile id names the specialisation in every refusal and cache key: it was accepted at any length
    (dict(id="a" * 1_000_000), "id 'aaaa"), (dict(id="../../x"), "must be 1 to 255 of [A-Za-z0-9_.-]"),
    # a keyword N=5 matched a constant N while the family bound N from the shapes: both were accepted
    (dict(constants={"N": 5}), "'N' is both a dimension and a constant"),
    (dict(scalars={"N": {"dtype": "int32", "default": 3}}), "'N' is both a dimension and a runtime scalar"),
    # a 10,000-character argument spec was echoed whole (a 10,089-character message)
    (dict(args=["N x 512:" + "f" * 10_000]), "... (10008 characters): expected SHAPE:DTYPE"),
    (dict(dims={"N": "1..2 " + "x" * 10_000}), "got '1..2 xxx"),
])  # fmt: skip
def test_a_hostile_family_record_is_refused_at_parse_with_a_short_message(softmax_bundle, changes, message):
    from hub_client.manifest import parse

    with pytest.raises(BundleError) as e:
        parse(_family_record_edited(softmax_bundle, **changes))
    assert message in str(e.value) and len(str(e.value)) < 300, str(e.value)[:500]


def test_a_family_keeps_its_newest_instances_only_and_leaves_other_families_alone(tmp_path, softmax_bundle,
                                                                                  monkeypatch):  # fmt: skip
    from hub_client import entry

    monkeypatch.setattr(entry, "MAX_INSTANCES", 2)
    k = kernels.get_local_kernel(softmax_bundle.write(tmp_path / "bundle"))
    ep = k._entry_points["softmax"]
    rng = np.random.default_rng(0)
    k.softmax(rng.standard_normal((5, 300)).astype(np.float32))  # the N x W family: another family's instance
    for n in (1, 2, 3):  # the N x 512 family, three shapes
        k.softmax(rng.standard_normal((n, 512)).astype(np.float32))
    kept = [key for key in ep._parsed if len(key) == 3]
    narrow, wide = ([key for key in kept if dict(key[1]).keys() == want] for want in ({"N"}, {"N", "W"}))
    assert [dict(key[1]) for key in narrow] == [{"N": 2}, {"N": 3}]  # the oldest shape went first
    assert [dict(key[1]) for key in wide] == [{"N": 5, "W": 300}]
