"""Test vectors: `kernels verify --run` re-runs the verified IR on them per specialisation; a bundle whose vectors
disagree with its IR is reported there and is never produced by the builder."""

import json
import shutil

import numpy as np
import pytest

import kernels
from hub_client.bundle import Bundle, build_bundle
from hub_client.cli import main
from hub_client.errors import BundleError
from hub_client.manifest import MANIFEST, dump, sha256_hex
from hub_client.npz import load_npz, npz_bytes
from hub_client.publish import publish
from hub_client.vectors import run_vectors
from tests.hub.conftest import SOFTMAX, settings


def _forged(bundle: Bundle) -> tuple[Bundle, str]:
    """The bundle with one expected output changed and every digest recomputed: consistent, but wrong."""
    files = dict(bundle.files)
    spec = next(s for e in bundle.manifest.entry_points.values() for s in e.specialisations if s.test_vectors)
    v = load_npz(files[spec.test_vectors])
    v["expected"] = v["expected"] + np.float32(0.5)
    files[spec.test_vectors] = npz_bytes(v)
    raw = json.loads(files[MANIFEST])
    raw["files"][spec.test_vectors] = sha256_hex(files[spec.test_vectors])
    files[MANIFEST] = dump(raw)
    return Bundle(files), spec.id


def test_verify_run_reports_each_specialisation(registry, softmax_bundle, capsys):
    publish(softmax_bundle, "acme/softmax", settings())
    kernels.get_kernel("acme/softmax", version=1)  # caches the IR only; --run fetches the vectors it needs
    assert main(["verify", "acme/softmax", "--version", "1", "--run"]) == 0
    out = capsys.readouterr().out
    specs = softmax_bundle.manifest.entry_points["softmax"].specialisations
    for spec in specs:  # one line each; a specialisation too large to ship vectors for says so
        assert f"softmax/{spec.id}: {'ok' if spec.test_vectors else 'none'}" in out
    assert f"{sum(bool(s.test_vectors) for s in specs)} specialisations agree on backend numpy" in out


def test_verify_run_catches_vectors_that_disagree(registry, softmax_bundle, capsys):
    forged, bad = _forged(softmax_bundle)
    publish(forged, "acme/softmax", settings())  # publish() takes a built bundle: the builder's check is bypassed
    kernels.get_kernel("acme/softmax", version=1)
    assert main(["verify", "acme/softmax", "--version", "1"]) == 0  # digests pass: the bytes are the published ones
    assert main(["verify", "acme/softmax", "--version", "1", "--run"]) == 1
    captured = capsys.readouterr()
    assert f"softmax/{bad}: mismatch" in captured.out and "outputs off" in captured.out
    n = len(softmax_bundle.manifest.entry_points["softmax"].specialisations)
    assert f"1 of {n} specialisations disagree" in captured.err


def test_vectors_with_the_wrong_shape_are_invalid_not_run(softmax_bundle):
    files = dict(softmax_bundle.files)
    spec = next(s for e in softmax_bundle.manifest.entry_points.values() for s in e.specialisations if s.test_vectors)
    v = load_npz(files[spec.test_vectors])
    v["arg0"] = v["arg0"][:, :1]  # one column: no shape the specialisation (a family of rows) takes
    files[spec.test_vectors] = npz_bytes(v)
    result = {r.spec: r for r in run_vectors(softmax_bundle.manifest, files.__getitem__)}[spec.id]
    assert result.status == "invalid" and "the specialisation says" in result.detail


def test_the_builder_refuses_a_package_whose_reference_disagrees(tmp_path):
    pkg = tmp_path / "softmax"
    shutil.copytree(SOFTMAX, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    ref = pkg / "reference.py"
    ref.write_text(ref.read_text() + "\n\n_good = softmax\n\n\ndef softmax(x):\n    return _good(x) * 2\n")
    with pytest.raises(BundleError, match="disagrees with its NumPy reference"):
        build_bundle(pkg, benchmarks=False)


def test_the_builder_rechecks_the_vectors_it_ships(monkeypatch):
    """Vectors are re-run from the shipped bytes: a fault between checking and writing them is caught too."""
    from hub_client import bundle as bundle_module

    real = bundle_module.npz_bytes

    def corrupting(arrays):
        return real({**arrays, "expected": arrays["expected"] + 1}) if "expected" in arrays else real(arrays)

    monkeypatch.setattr(bundle_module, "npz_bytes", corrupting)
    with pytest.raises(BundleError, match="test vectors disagree with its IR"):
        build_bundle(SOFTMAX, benchmarks=False)


def _npy_header(shape, descr="<f8") -> bytes:
    """An .npy version 1.0 header declaring ``shape``, without the data."""
    import struct

    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    header = text.encode() + b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize("data, message", [
    # NumPy allocated what a header declares before reading: 7 TiB was a MemoryError, 2 GiB was allocated
    (_zip({"expected.npy": _npy_header((10**6, 10**6))}), "the arrays declare more than 64 MiB"),
    (_zip({"expected.npy": _npy_header((2**28,))}), "the arrays declare more than 64 MiB"),
    # 74 KB of deflate holding 72 MiB were decompressed whole (1 MB made a 1 GiB array)
    (lambda: _zip({"expected.npy": _npy_header((9 << 20,)) + bytes(72 << 20)}), "more than 64 arrays or 64 MiB"),
    (_zip({"expected.npy": _npy_header((3,), "|O")}), "an object array"),  # was a plain ValueError
    (_zip({"expected.npy": b"junk"}), "EOF: reading magic string"),  # was loaded as the bytes b'junk'
    (_zip({"expected.txt": b"1"}), "is not an .npy array"),
    (b"PK\x03\x04junk", "BadZipFile"),  # zipfile.BadZipFile escaped the vector check
])  # fmt: skip
def test_hostile_vector_files_are_refused_before_anything_is_allocated(softmax_bundle, data, message):
    data = data() if callable(data) else data  # (the large one is made only when its case runs)
    with pytest.raises(BundleError, match=message):
        load_npz(data)
    files = dict(softmax_bundle.files)
    spec = next(s for e in softmax_bundle.manifest.entry_points.values() for s in e.specialisations if s.test_vectors)
    files[spec.test_vectors] = data
    result = {r.spec: r for r in run_vectors(softmax_bundle.manifest, files.__getitem__)}[spec.id]
    assert result.status == "invalid" and message in result.detail
