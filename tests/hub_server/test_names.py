"""The registry's name rules one by one (names.py is its security boundary): each rule has a name it refuses and a
neighbour it accepts, so weakening or tightening any one of them fails a test. The HTTP tests elsewhere show the
refusals reach clients as 400s; these pin the rules themselves."""

from __future__ import annotations

import pytest

from hub_client.server import names
from hub_client.server.errors import HubError

from .conftest import WRITE_TOKEN, raw_request


def _refused(check, value, *args) -> str:
    with pytest.raises(HubError) as caught:
        check(value, *args)
    assert caught.value.status == 400 and caught.value.code == "BadRequest"
    return caught.value.message


# -- repo types ------------------------------------------------------------------------------------------------

def test_repo_types_default_to_model_and_refuse_others():
    assert names.repo_type(None) == "model" and names.repo_type("") == "model"
    for kind in ("model", "dataset", "space", "kernel"):
        assert names.repo_type(kind) == kind
    assert "bucket" in _refused(names.repo_type, "bucket")
    assert names.REPO_TYPES["kernel"] == "kernels" and names.PLURAL_TO_TYPE["kernels"] == "kernel"
    assert names.URL_PREFIX == {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}


# -- repo and namespace names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a", "A9", "soft-max", "soft_max", "v1.2", "a.b.c", "x" * 96, "9lives", "a-b_c.d"])
def test_ordinary_repo_names_are_accepted(name):
    assert names.repo_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "a..b",  # '..' inside a name: a path component trick, and git revision syntax
        "x..",
        "..x",
        "..",
        "a--b",  # the Hub reserves '--' (cache folder names: kernels--org--name)
        "x" * 97,  # at most 96 characters
        "",
        ".hidden",  # must start alphanumeric
        "-dash",
        "_under",
        "x.git",  # ends like a bare repo directory
        "x.GIT",
        "x.lock",  # ends like a git lock file
        "a b",
        "a/b",
        "a\\b",
        "a\x00b",
        "caf\u00e9",
        "a+b",
        "a~b",
    ],
)
def test_repo_names_that_could_escape_or_confuse_are_refused(name):
    message = _refused(names.repo_name, name, "namespace")
    assert "namespace" in message


def test_repo_name_type_is_checked():
    _refused(names.repo_name, None)
    _refused(names.repo_name, 5)
    assert _refused(names.repo_name, "a..b").startswith("Invalid repo name 'a..b': ")


@pytest.mark.parametrize("org", ["ac..me", "a--cme", ".acme", "acme.git"])
def test_a_namespace_with_dot_dot_or_dashes_is_refused_over_http(registry, org):
    """The mutant 'names.py: `..` inside a repo name accepted' would create `<root>/kernels/ac..me/x`."""
    created = raw_request(registry, "POST", "/api/repos/create", {"name": "x", "organization": org,
                                                                  "type": "kernel"}, token=WRITE_TOKEN)
    assert created.status == 400, org
    if ".." in org or "--" in org:  # inside a repo name too
        inner = ".." if ".." in org else "--"
        also = raw_request(registry, "POST", "/api/repos/create", {"name": f"x{inner}y", "organization": "acme",
                                                                   "type": "kernel"}, token=WRITE_TOKEN)
        assert also.status == 400, org
    assert raw_request(registry, "GET", f"/api/kernels/{org}/x").status == 400
    assert sorted(p.name for p in registry.root.iterdir()) == [".tmp"]


# -- ref names -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ref", ["main", "v1", "v1.0.0", "feature/x", "a-b_c", "x" * 255, "v1.0.0-rc.1", "@x",
                                 "a@b", "x.y/z"])
def test_ordinary_ref_names_are_accepted(ref):
    assert names.ref_name(ref) == ref


@pytest.mark.parametrize(
    "ref",
    ["", "x" * 256, "a b", "a\tb", "a\x7fb", "a\x00b", "a~1", "a^", "a:b", "a?b", "a*b", "a[b", "a\\b", "a%2F",
     "-x", "/x", ".x", "x/", "x.", "x.lock", "a..b", "a//b", "a@{1}", "a/.b", "@", "HEAD"],
)
def test_ref_names_git_would_read_as_expressions_are_refused(ref):
    assert "branch" in _refused(names.ref_name, ref, "branch")


def test_ref_name_type_is_checked():
    _refused(names.ref_name, None)
    _refused(names.ref_name, ["main"])
    assert _refused(names.ref_name, "a..b") == "Invalid revision 'a..b'"


def test_full_sha_is_forty_lowercase_hex():
    assert names.FULL_SHA.fullmatch("0123456789abcdef" * 2 + "01234567")
    for bad in ("A" * 40, "0" * 39, "0" * 41, "g" * 40):
        assert not names.FULL_SHA.fullmatch(bad)


# -- paths in a repo -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "a", "a/b/c.txt", "fileX", "X", "dirX/fileX", ".gitattributes", ".gitignore", ".github/x.yml", "git~x",
    "console", "con-fig", "a b", " lead", "é", "x" * 255, "dir.d/file", "COM", "LPT", "comx", "gitmodules",
    ".gitmodulesx", "x.git", ".gitx",
])
def test_ordinary_paths_are_accepted(path):
    assert names.path_in_repo(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "Empty"),
        (None, "Empty"),
        ("a\x00b", "NUL"),
        ("a\\b", "backslash"),
        ("/abs", "absolute"),
        ("a//b", "empty"),
        ("a/./b", "empty"),
        ("a/../b", "empty"),
        ("a/", "empty"),
        (".git", "reserved by git"),
        (".GIT", "reserved by git"),
        ("x/.gIt/y", "reserved by git"),
        ("git~1", "reserved by git"),
        ("GIT~12", "reserved by git"),
        (".gitmodules", "reserved by git"),
        (".GITMODULES", "reserved by git"),
        ("gitmod~1", "reserved by git"),
        ("con", "device name"),
        ("CON.txt", "device name"),
        ("aux", "device name"),
        ("prn.log", "device name"),
        ("nul", "device name"),
        ("com0", "device name"),
        ("COM9.x", "device name"),
        ("lpt1", "device name"),
        ("com\u00b9", "device name"),
        ("a\x01b", "U+0001"),
        ("a\x1fb", "U+001F"),
        ("a\x7fb", "U+007F"),
        ("a\u202eb", "U+202E"),
        ("a\u2066b", "U+2066"),
        ("a\u200bb", "U+200B"),
        ("a\u2029b", "U+2029"),
        ("a\ud800b", "U+D800"),
        ("a\U000f0000b", "U+F0000"),
        ("a\u0378b", "U+0378"),  # unassigned
        ("a<b", "Windows"),
        ("a>b", "Windows"),
        ("a:b", "Windows"),
        ('a"b', "Windows"),
        ("a|b", "Windows"),
        ("a?b", "Windows"),
        ("a*b", "Windows"),
        ("e\u0301", "NFC"),
        (" ", "blank"),
        ("a/  /b", "blank"),
        ("x.", "end in a dot or space"),
        ("x ", "end in a dot or space"),
        ("x\u3000", "end in a dot or space"),
        ("x" * 256, "longer than 255 bytes"),
        ("é" * 128, "longer than 255 bytes"),
        ("/".join(["d"] * 33), "33 levels deep"),
        ("/".join(["a" * 255, "b" * 255, "c" * 255]) + "/d", "769 bytes"),
    ],
)
def test_paths_git_or_a_filesystem_rejects_are_refused_with_the_reason(path, reason):
    assert reason in _refused(names.path_in_repo, path)


def test_messages_name_the_path_and_cut_long_ones_at_64_characters():
    assert _refused(names.path_in_repo, "") == "Empty path in repo"
    long_name = "".join(chr(ord("a") + i % 26) for i in range(300))
    assert _refused(names.path_in_repo, long_name).startswith(f"Invalid path {long_name[:64]!r}...: a name is")
    too_long = "/".join([long_name[:200]] * 4)
    assert _refused(names.path_in_repo, too_long).startswith(f"Invalid path {too_long[:64]!r}...: 803 bytes")


def test_path_limits_are_exact():
    assert names.path_in_repo("/".join(["d"] * 32)) and names.path_in_repo("é" * 127 + "x")
    exactly = "/".join(["a" * 255, "b" * 255, "c" * 254, "d"])
    assert len(exactly.encode()) == names.MAX_PATH_BYTES == 768 and names.path_in_repo(exactly)
    assert names.MAX_SEGMENT_BYTES == 255 and names.MAX_PATH_DEPTH == 32
