"""Names and paths that could escape a repo or smuggle git syntax are refused with 400, and nothing is written."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from .conftest import WRITE_TOKEN, git, ndjson, raw_request, repo_dir

ESCAPING_PATHS = [
    "../outside.txt",
    "build/../../outside.txt",
    "/etc/passwd",
    "build\\..\\outside.txt",
    "with\x00nul.txt",
    "build//double.txt",
    "build/./dot.txt",
    "trailing/",
    ".git/config",
    "",
]


def _state(registry):
    """Refs plus the loose-object count: a refused commit must change neither."""
    bare = repo_dir(registry, "acme/softmax")
    return git(bare, "for-each-ref").stdout, git(bare, "count-objects").stdout


def _commit(registry, *ops, parent=None, revision="v1"):
    header = {"summary": "bad"}
    if parent:
        header["parentCommit"] = parent
    body = ndjson({"key": "header", "value": header}, *ops)
    return raw_request(registry, "POST", f"/api/kernels/acme/softmax/commit/{revision}", body, token=WRITE_TOKEN,
                       headers={"Content-Type": "application/x-ndjson"})


def _file(path, content=b"x"):
    return {"key": "file", "value": {"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"}}


@pytest.mark.parametrize("path", ESCAPING_PATHS)
def test_commit_with_an_escaping_path_is_refused(registry, kernel_repo, path):
    before = _state(registry)
    # The bad path comes after a good one: validation covers the whole payload before anything is stored.
    response = _commit(registry, _file("good.txt"), _file(path))
    assert response.status == 400, response.body
    assert response.headers["x-error-message"]
    assert _state(registry) == before


@pytest.mark.parametrize("path", ["../x", "/abs", "a\\b", "a\x00b", "a//b"])
def test_delete_with_an_escaping_path_is_refused(registry, kernel_repo, path):
    before = _state(registry)
    assert _commit(registry, {"key": "deletedFile", "value": {"path": path}}).status == 400
    assert _commit(registry, {"key": "deletedFolder", "value": {"path": path}}).status == 400
    assert _state(registry) == before


@pytest.mark.parametrize(
    "ops",
    [
        [{"key": "lfsFile", "value": {"path": "big.bin", "algo": "sha256", "oid": "0" * 64, "size": 3}}],
        [{"key": "file", "value": {"path": "a.txt", "content": "not base64!", "encoding": "base64"}}],
        [{"key": "file", "value": {"path": "a.txt", "content": "eA==", "encoding": "utf-8"}}],
        [_file("same.txt"), _file("same.txt")],
        [{"key": "rename", "value": {"path": "a.txt"}}],
        [_file("manifest.json/inner.txt")],  # manifest.json is a file on v1
        [_file("build")],  # build is a directory on v1
    ],
)
def test_malformed_operations_are_refused(registry, kernel_repo, ops):
    before = _state(registry)
    assert _commit(registry, *ops).status == 400
    assert _state(registry) == before


def test_malformed_payloads_are_refused(registry, kernel_repo):
    before = _state(registry)
    path = "/api/kernels/acme/softmax/commit/v1"
    for body in (b"", b"not json\n", ndjson(_file("a.txt")), ndjson({"key": "header", "value": {}}),
                 ndjson({"key": "header", "value": {"summary": "x", "parentCommit": "HEAD~1"}})):
        assert raw_request(registry, "POST", path, body, token=WRITE_TOKEN).status == 400, body
    assert _state(registry) == before


@pytest.mark.parametrize(
    "url",
    [
        "/kernels/acme/softmax/resolve/v1/../../../../etc/passwd",
        "/kernels/acme/softmax/resolve/v1/build/%2e%2e/manifest.json",
        "/kernels/acme/softmax/resolve/v1/%2Fetc%2Fpasswd",
        "/kernels/acme/softmax/resolve/v1/build%5Cir%5Csoftmax.nki",
        "/kernels/acme/softmax/resolve/v1/manifest.json%00.txt",
        "/kernels/acme/softmax/resolve/v1/build//ir/softmax.nki",
        "/kernels/acme/softmax/resolve/v1/",
        "/api/kernels/acme/softmax/tree/v1/..%2F..%2F..",
        "/api/kernels/acme/softmax/tree/v1/build%2F%2Fir",
    ],
)
def test_requests_with_escaping_paths_are_refused(registry, kernel_repo, url):
    for method in ("GET", "HEAD") if "/resolve/" in url else ("GET",):
        response = raw_request(registry, method, url)
        assert response.status == 400, (method, url, response.status)
        assert b"root:" not in response.body


def test_preupload_with_an_escaping_path_is_refused(registry, kernel_repo):
    for path in ("../x", "/x", "a\\b", "a\x00b", ""):
        response = raw_request(registry, "POST", "/api/kernels/acme/softmax/preupload/v1",
                               {"files": [{"path": path, "sample": "", "size": 0}]}, token=WRITE_TOKEN)
        assert response.status == 400, path


@pytest.mark.parametrize("revision", ["HEAD~1", "v1^", "main@%7B0%7D", "v1..main", "-v1", "v1%3Amanifest.json",
                                      "main.lock", "HEAD", "%20main"])
def test_revisions_that_are_git_expressions_are_refused(registry, kernel_repo, revision):
    for url in (f"/kernels/acme/softmax/resolve/{revision}/manifest.json",
                f"/api/kernels/acme/softmax/revision/{revision}", f"/api/kernels/acme/softmax/tree/{revision}"):
        assert raw_request(registry, "GET", url).status == 400, url


@pytest.mark.parametrize("name", ["..", "a--b", ".hidden", "x.git", "-dash", "a b", "a/b/c", "a\\b", "a\x00b"])
def test_repo_names_that_could_escape_the_root_are_refused(registry, name):
    created = raw_request(registry, "POST", "/api/repos/create", {"name": name, "organization": "acme",
                                                                  "type": "kernel"}, token=WRITE_TOKEN)
    assert created.status == 400, name
    in_url = quote(name, safe="")
    assert raw_request(registry, "GET", f"/api/kernels/acme/{in_url}").status in (400, 404)
    assert raw_request(registry, "GET", f"/api/kernels/{in_url}/softmax").status in (400, 404)
    assert sorted(p.name for p in registry.root.iterdir()) == [".tmp"]


def test_bad_branch_and_tag_names_are_refused(registry, kernel_repo):
    for branch in ("a..b", "x~1", "refs%2Fheads%2Fx", "a%5Cb"):
        assert raw_request(registry, "POST", f"/api/kernels/acme/softmax/branch/{branch}", {},
                           token=WRITE_TOKEN).status == 400, branch
    for tag in ("a..b", "x~1", "", "v1@{0}", "a b"):
        assert raw_request(registry, "POST", "/api/kernels/acme/softmax/tag/v1", {"tag": tag},
                           token=WRITE_TOKEN).status == 400, tag


def test_unknown_repo_type_is_refused(registry):
    response = raw_request(registry, "POST", "/api/repos/create", {"name": "x", "organization": "acme",
                                                                   "type": "bucket"}, token=WRITE_TOKEN)
    assert response.status == 400
