"""Bundle paths come from the network: anything that could escape the bundle directory is refused."""

import json

import pytest

from hub_client.errors import BundleError, UnsafePathError
from hub_client.manifest import dump, parse
from hub_client.paths import check_bundle_path

BAD = ["../etc/passwd", "ir/../../x", "/etc/passwd", "C:/x", "ir\\x.nkir", "ir/x\x00.nkir", "", "ir//x", "./x",
       "ir/.", "ir/ x", "~/x"]  # fmt: skip


@pytest.mark.parametrize("path", BAD, ids=repr)
def test_unsafe_paths_refused(path):
    with pytest.raises(UnsafePathError):
        check_bundle_path(path)


@pytest.mark.parametrize("path", ["manifest.json", "ir/softmax/128x512-float32.nkir", "src/soft_max/__init__.py"])
def test_plain_paths_accepted(path):
    assert check_bundle_path(path) == path


@pytest.mark.parametrize("path", ["../evil.py", "/abs.nkir", "a\\b.nkir", "a\x00b"], ids=repr)
def test_manifest_with_escaping_path_refused(softmax_bundle, path):
    manifest = json.loads(softmax_bundle.files["manifest.json"])
    ir = manifest["entry_points"]["softmax"]["specialisations"][0]["ir"]
    manifest["files"][path] = manifest["files"].pop(ir)
    manifest["entry_points"]["softmax"]["specialisations"][0]["ir"] = path
    with pytest.raises(UnsafePathError, match="bundle path"):
        parse(dump(manifest))


def test_manifest_naming_an_undigested_file_refused(softmax_bundle):
    manifest = json.loads(softmax_bundle.files["manifest.json"])
    manifest["entry_points"]["softmax"]["specialisations"][0]["ir"] = "ir/softmax/other.nkir"
    with pytest.raises(BundleError, match="has no digest"):
        parse(dump(manifest))
