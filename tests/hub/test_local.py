"""Loading from a local bundle or package: the trust model, specialisation matching, digest and IR checks."""

import json

import numpy as np
import pytest

import kernels
from hub_client.manifest import MANIFEST, dump, sha256_hex
from tests.hub.conftest import RMSNORM


def _softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture
def bundle_dir(tmp_path, softmax_bundle):
    return softmax_bundle.write(tmp_path / "bundle")


def _rewrite(bundle_dir, rel, data: bytes):
    """Replace a file and re-digest it in the manifest: a well-formed bundle whose content is the test's."""
    (bundle_dir / rel).write_bytes(data)
    manifest = json.loads((bundle_dir / MANIFEST).read_bytes())
    manifest["files"][rel] = sha256_hex(data)
    (bundle_dir / MANIFEST).write_bytes(dump(manifest))


def test_untrusted_load_runs_the_published_ir(bundle_dir):
    k = kernels.get_local_kernel(bundle_dir)
    x = np.random.default_rng(0).standard_normal((300, 512)).astype(np.float32)
    np.testing.assert_allclose(k.softmax(x), _softmax(x), rtol=1e-5, atol=1e-7)
    assert k.info.trusted is False and k.module is None and k.info.entry_points == ("softmax",)


def test_unpublished_shape_lists_specialisations_and_opt_in(bundle_dir):
    k = kernels.get_local_kernel(bundle_dir)
    with pytest.raises(kernels.NoSpecialisationError) as e:
        k.softmax(np.ones((5, 9000), np.float32))  # wider rows than any published family takes
    msg = str(e.value)
    assert "5x9000:float32" in msg and "softmax(N x 512:float32) with N in 1..65536" in msg
    assert "trust_remote_code=True" in msg


def test_trusted_load_runs_any_shape(bundle_dir):
    k = kernels.get_local_kernel(bundle_dir, trust_remote_code=True)
    x = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(k.softmax(x), _softmax(x), rtol=1e-5, atol=1e-7)
    assert k.module.__name__.startswith("_kernels_hub_softmax_")


def test_constants_select_the_specialisation():
    k = kernels.get_local_kernel(RMSNORM)  # a package directory is built into a bundle first
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((128, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    expected = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(k.rmsnorm(x, g), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=1e-6), expected, rtol=1e-5, atol=1e-5)
    # another epsilon: not the fixed specialisations' constant, so the width family, whose epsilon is a runtime scalar
    wide = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=1, keepdims=True) + 0.5) * g
    np.testing.assert_allclose(k.rmsnorm(x, g, epsilon=0.5), wide, rtol=1e-5, atol=1e-5)
    with pytest.raises(kernels.NoSpecialisationError, match="eps=0.001"):
        k.rmsnorm(x, g, eps=1e-3)  # a keyword no specialisation has


def test_tampered_local_file_is_refused(bundle_dir, softmax_bundle):
    rel = softmax_bundle.manifest.ir_files()[0]
    (bundle_dir / rel).write_bytes(b"kernel evil() -> () {}\n")
    with pytest.raises(kernels.DigestMismatchError) as e:
        kernels.get_local_kernel(bundle_dir)
    assert rel in str(e.value) and softmax_bundle.manifest.files[rel] in str(e.value)
    assert sha256_hex(b"kernel evil() -> () {}\n") in str(e.value)


def test_ir_that_does_not_parse_is_refused(bundle_dir, softmax_bundle):
    rel = softmax_bundle.manifest.ir_files()[0]
    _rewrite(bundle_dir, rel, b"kernel softmax_kernel(%x: f32[128, 512] hbm) -> (%0) { this is not IR }\n")
    k = kernels.get_local_kernel(bundle_dir)
    with pytest.raises(kernels.IRRejectedError, match=rel):
        k.softmax(np.ones((128, 512), np.float32))


def test_ir_that_fails_verification_is_refused_with_the_verifiers_message(bundle_dir, softmax_bundle):
    rel = softmax_bundle.manifest.ir_files()[0]
    text = softmax_bundle.files[rel].decode()
    # A 256-partition tile: parses fine, but the hardware has 128 partitions.
    bad = text.replace("%x[d0 + 128*i0, d1 ; 128x512]", "%x[d0 + 128*i0, d1 ; 256x512]").replace(
        ": f32[128, 512] sbuf", ": f32[256, 512] sbuf"
    )
    assert bad != text
    _rewrite(bundle_dir, rel, bad.encode())
    k = kernels.get_local_kernel(bundle_dir)
    with pytest.raises(kernels.IRRejectedError) as e:
        k.softmax(np.ones((128, 512), np.float32))
    assert rel in str(e.value) and "128" in str(e.value) and "partition" in str(e.value)


def test_two_versions_load_side_by_side(tmp_path, softmax_bundles):
    a = kernels.get_local_kernel(softmax_bundles["1.0.0"].write(tmp_path / "a"), trust_remote_code=True)
    b = kernels.get_local_kernel(softmax_bundles["1.1.0"].write(tmp_path / "b"), trust_remote_code=True)
    assert a.module is not b.module and a.module.__name__ != b.module.__name__
    assert (a.info.version, b.info.version) == ("1.0.0", "1.1.0")
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(a.softmax(x), b.softmax(x))


def test_unknown_backend_is_refused_early(bundle_dir):
    with pytest.raises(ValueError, match="unknown backend 'vulkan'; available: jax, numpy, simulator"):
        kernels.get_local_kernel(bundle_dir, backend="vulkan")


def test_hf_backend_names(bundle_dir):
    """HF kernels' device names: cpu is the NumPy reference; a device this project has no build for is refused,
    naming what runs here."""
    x = np.random.default_rng(1).standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_array_equal(kernels.get_local_kernel(bundle_dir, backend="cpu").softmax(x),
                                  kernels.get_local_kernel(bundle_dir, backend="numpy").softmax(x))  # fmt: skip
    for device in ("cuda", "rocm", "metal", "xpu", "tpu", "npu"):
        with pytest.raises(ValueError, match=rf"backend '{device}': .*compiled {device} build.*'cpu' \(numpy\)"):
            kernels.get_local_kernel(bundle_dir, backend=device)


def test_simulator_backend_matches_numpy(bundle_dir):
    k = kernels.get_local_kernel(bundle_dir)
    x = np.random.default_rng(3).standard_normal((128, 512)).astype(np.float32)
    np.testing.assert_array_equal(k.softmax(x, backend="simulator", target="trn2"), k.softmax(x))


@pytest.mark.parametrize("per_call", [True, False])
def test_jax_backend_runs_the_published_ir(bundle_dir, per_call):
    # The verified IR specialisation (no published Python runs) compiled by XLA: per call, or as the load's default.
    k = kernels.get_local_kernel(bundle_dir) if per_call else kernels.get_local_kernel(bundle_dir, backend="jax")
    x = np.random.default_rng(4).standard_normal((300, 512)).astype(np.float32)
    got = k.softmax(x, backend="jax") if per_call else k.softmax(x)
    assert type(got).__module__.startswith("jax")
    np.testing.assert_allclose(np.asarray(got), k.softmax(x, backend="numpy"), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(got), _softmax(x), rtol=1e-5, atol=1e-7)
