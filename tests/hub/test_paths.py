"""Bundle paths come from the network: anything that could escape the bundle directory is refused."""

import json

import pytest

from hub_client.errors import BundleError, UnsafePathError
from hub_client.manifest import dump, parse
from hub_client.paths import check_bundle_path
from tests.hub.ids import spelled

BAD = ["../etc/passwd", "ir/../../x", "/etc/passwd", "C:/x", "ir\\x.nkir", "ir/x\x00.nkir", "", "ir//x", "./x",
       "ir/.", "ir/ x", "~/x"]  # fmt: skip
# A leading dot: git's own files (.git/config, .gitattributes), hidden files, and names made only of dots.
# Python's `$` also matches before a final newline: every check must anchor at the very end of the string.
BAD += ["ir/x.nkir\n", "ir\n/x", "x\n"]
DOTTED = [".git/config", ".GIT/config", "ir/.hidden", ".gitattributes", "src/pkg/.env", "...", "ir/..x"]


@pytest.mark.parametrize("path", BAD, ids=spelled)
def test_unsafe_paths_refused(path):
    with pytest.raises(UnsafePathError):
        check_bundle_path(path)


@pytest.mark.parametrize("path", DOTTED, ids=spelled)
def test_a_leading_dot_is_refused_in_every_component(path):
    with pytest.raises(UnsafePathError, match="outside"):
        check_bundle_path(path)


@pytest.mark.parametrize("path", ["ir/.hidden", ".git/config"])
def test_a_manifest_naming_a_dotted_file_is_refused(softmax_bundle, path):
    manifest = json.loads(softmax_bundle.files["manifest.json"])
    manifest["files"][path] = "0" * 64
    with pytest.raises(UnsafePathError, match=repr(path.split("/")[-1] if path.startswith("ir") else ".git")):
        parse(dump(manifest))


@pytest.mark.parametrize("path", ["manifest.json", "ir/softmax/128x512-float32.nkir", "src/soft_max/__init__.py",
                                  "a.b.c", "_x/y_", "0/9", "v1-x/a-b.c"])  # fmt: skip
def test_plain_paths_accepted(path):
    assert check_bundle_path(path) == path


@pytest.mark.parametrize("path", ["../evil.py", "/abs.nkir", "a\\b.nkir", "a\x00b"], ids=spelled)
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


def test_manifest_checks_anchor_at_the_very_end(softmax_bundle):
    manifest = json.loads(softmax_bundle.files["manifest.json"])
    rel = next(iter(manifest["files"]))
    with pytest.raises(BundleError, match="sha256 hex digest"):
        parse(dump({**manifest, "files": {**manifest["files"], rel: manifest["files"][rel] + "\n"}}))
    entries = {"softmax\n": manifest["entry_points"]["softmax"]}
    with pytest.raises(BundleError, match="public identifier"):
        parse(dump({**manifest, "entry_points": entries}))


@pytest.mark.parametrize("name", ["v1.0.0\n", "v\u0661.0.0", "v1.0.0x", "1.0.0", "v01.0.0"], ids=spelled)
def test_only_plain_release_tags_are_releases(name):
    from hub_client import versions

    assert versions.parse_tag(name) is None and versions.parse_tag("v10.0.3") == (10, 0, 3)


@pytest.mark.parametrize("path, why", [
    (None, "must be a non-empty string"), (3, "must be a non-empty string"), ("", "must be a non-empty string"),
    ("a\x00b", "contains a NUL byte"), ("a\\b", "contains a backslash (paths use '/')"),
    ("/etc/x", "is absolute"), ("c:/x", "is absolute"), ("Z:x", "is absolute"),
    ("a//b", "has an empty, '.' or '..' component"), ("a/./b", "has an empty, '.' or '..' component"),
    ("a/..", "has an empty, '.' or '..' component"), ("a/", "has an empty, '.' or '..' component"),
    ("a/b c", "component 'b c' has characters outside [A-Za-z0-9_.-]"),
    ("a/.b", "component '.b' has characters outside [A-Za-z0-9_.-]"),
    ("a/-b", "component '-b' has characters outside [A-Za-z0-9_.-]"),
], ids=spelled)  # fmt: skip
def test_each_refusal_says_why(path, why):
    with pytest.raises(UnsafePathError) as e:
        check_bundle_path(path)
    assert str(e.value) == f"bundle path {path!r}: {why}"


@pytest.mark.parametrize("path, why", [
    ("x" * 256, "component 'xxxx"),  # one name past what file systems hold: was OSError ENAMETOOLONG at open
    ("a/" * 600 + "b", "is longer than 1024 characters"),
    ("../" + "x" * 100_000, "is longer than 1024 characters"),
])  # fmt: skip
def test_paths_past_what_a_file_system_holds_are_refused_with_a_short_message(path, why):
    with pytest.raises(UnsafePathError) as e:
        check_bundle_path(path)
    assert why in str(e.value) and len(str(e.value)) < 400
    assert check_bundle_path("x" * 255) == "x" * 255



X100 = "'" + "x" * 100 + "'"  # how a refusal quotes the first 100 characters of a long path


@pytest.mark.parametrize("path, message", [
    ("x" * 99 + " ", f"bundle path {'x' * 99 + ' '!r}: component {'x' * 99 + ' '!r} has characters outside "
                     f"[A-Za-z0-9_.-]"),  # 100 characters: quoted whole
    ("x" * 100 + " ", f"bundle path {X100}... (101 characters): component {X100}... (101 characters) has characters "
                      f"outside [A-Za-z0-9_.-]"),
    ("x" * 256, f"bundle path {X100}... (256 characters): component {X100}... (256 characters) is longer than 255 "
                f"characters"),
    ("/".join(["x" * 204] * 5) + "y", f"bundle path {X100}... (1025 characters): is longer than 1024 characters"),
    ("x" * 100_000, f"bundle path {X100}... (100000 characters): is longer than 1024 characters"),
    (b"x" * 97, f"bundle path b'{'x' * 97}': must be a non-empty string"),  # no string, repr of 100: whole
    (b"x" * 98, f"bundle path b'{'x' * 98}...: must be a non-empty string"),  # repr of 101: its first 100
    ([0] * 10_000, f"bundle path [{'0, ' * 33}...: must be a non-empty string"),
], ids=["100-chars", "101-chars", "long-component", "1025-chars", "100k-chars", "repr-100", "repr-101", "a-list"])
def test_a_refusal_quotes_the_path_and_component_whole_up_to_100_characters_and_cut_past_them(path, message):
    with pytest.raises(UnsafePathError) as e:
        check_bundle_path(path)
    assert str(e.value) == message


def test_a_path_of_exactly_1024_characters_is_accepted():
    path = "/".join(["x" * 204] * 5)
    assert len(path) == 1024 and check_bundle_path(path) == path
