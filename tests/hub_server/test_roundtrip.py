"""Publish and fetch through the real huggingface_hub client: every read and write endpoint the kernels flow uses."""

from __future__ import annotations

import http.client
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from hub_client.server import serve

from .conftest import WRITE_TOKEN, git, ndjson, raw_request, repo_dir


def test_create_repo_returns_kernel_url_and_a_main_branch(api, registry):
    url = api.create_repo("acme/softmax", repo_type="kernel")
    assert url == f"{registry.url}/kernels/acme/softmax"
    assert url.repo_type == "kernel" and url.repo_id == "acme/softmax"
    refs = api.list_repo_refs("acme/softmax", repo_type="kernel")
    assert [branch.name for branch in refs.branches] == ["main"]
    assert api.create_repo("acme/softmax", repo_type="kernel", exist_ok=True).repo_id == "acme/softmax"


def test_upload_folder_then_list_files_and_tree(api, tmp_path):
    folder = tmp_path / "bundle"
    (folder / "build" / "ir").mkdir(parents=True)
    (folder / "build" / "ir" / "softmax.nki").write_text("kernel softmax\n")
    (folder / "README.md").write_text("---\nlicense: apache-2.0\ntags: [kernel]\n---\n# softmax\n")
    api.create_repo("acme/softmax", repo_type="kernel")
    api.create_branch("acme/softmax", repo_type="kernel", branch="v1")
    info = api.upload_folder(repo_id="acme/softmax", repo_type="kernel", folder_path=folder, revision="v1")
    files = api.list_repo_files("acme/softmax", repo_type="kernel", revision="v1")
    assert sorted(files) == [".gitattributes", "README.md", "build/ir/softmax.nki"]
    top = {entry.path: type(entry).__name__ for entry in api.list_repo_tree("acme/softmax", repo_type="kernel",
                                                                            revision=info.oid)}
    assert top == {".gitattributes": "RepoFile", "README.md": "RepoFile", "build": "RepoFolder"}
    nested = list(api.list_repo_tree("acme/softmax", path_in_repo="build", repo_type="kernel", revision="v1"))
    assert [entry.path for entry in nested] == ["build/ir"]
    deep = list(api.list_repo_tree("acme/softmax", repo_type="kernel", revision="v1", recursive=True))
    sizes = {entry.path: getattr(entry, "size", None) for entry in deep}
    assert sizes["build/ir/softmax.nki"] == len("kernel softmax\n") and "build/ir" in sizes
    assert "build/ir/softmax.nki" not in api.list_repo_files("acme/softmax", repo_type="kernel")  # main untouched


def test_a_tree_listing_of_a_missing_path_or_of_a_file_is_not_found(api, kernel_repo, registry):
    # the Hub answers 404 EntryNotFound for both: a listing is of a directory, never an empty or one-file one
    for path in ("build/missing", "manifest.json"):
        with pytest.raises(EntryNotFoundError):
            list(api.list_repo_tree(kernel_repo, path_in_repo=path, repo_type="kernel", revision="v1"))
        raw = raw_request(registry, "GET", f"/api/kernels/{kernel_repo}/tree/v1/{path}")
        assert raw.status == 404 and raw.error_code == "EntryNotFound"


def test_blob_ids_are_git_blob_ids(api, kernel_repo, registry):
    blob = git(repo_dir(registry, kernel_repo), "rev-parse", "v1:manifest.json").stdout.strip()
    tree = {entry.path: entry for entry in api.list_repo_tree(kernel_repo, repo_type="kernel", revision="v1")}
    assert tree["manifest.json"].blob_id == blob


def test_repo_info_reports_sha_and_siblings(api, kernel_repo):
    refs = api.list_repo_refs(kernel_repo, repo_type="kernel")
    v1 = next(branch.target_commit for branch in refs.branches if branch.name == "v1")
    info = api.repo_info(kernel_repo, repo_type="kernel", revision="v1")
    assert info.id == kernel_repo and info.sha == v1 and info.private is False
    main = api.repo_info(kernel_repo, repo_type="kernel")
    assert main.sha != v1
    assert api.revision_exists(kernel_repo, "v1", repo_type="kernel")
    assert not api.revision_exists(kernel_repo, "v9", repo_type="kernel")
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("acme/missing", repo_type="kernel")


def test_tags_point_at_commits_and_list_in_refs(api, kernel_repo):
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0-annotated", revision="v1", tag_message="release")
    refs = api.list_repo_refs(kernel_repo, repo_type="kernel")
    v1 = next(branch.target_commit for branch in refs.branches if branch.name == "v1")
    assert {tag.name: tag.target_commit for tag in refs.tags} == {"v1.0.0": v1, "v1.0.0-annotated": v1}
    assert api.repo_info(kernel_repo, repo_type="kernel", revision="v1.0.0-annotated").sha == v1
    api.delete_tag(kernel_repo, repo_type="kernel", tag="v1.0.0-annotated")
    assert [tag.name for tag in api.list_repo_refs(kernel_repo, repo_type="kernel").tags] == ["v1.0.0"]


def test_branch_from_starting_point_and_delete(api, kernel_repo):
    api.create_branch(kernel_repo, repo_type="kernel", branch="feature/x", revision="v1")
    branches = api.list_repo_refs(kernel_repo, repo_type="kernel").branches
    refs = {branch.name: branch.target_commit for branch in branches}
    assert refs["feature/x"] == refs["v1"]
    assert api.file_exists(kernel_repo, "manifest.json", repo_type="kernel", revision="feature/x")
    api.delete_branch(kernel_repo, repo_type="kernel", branch="feature/x")
    assert "feature/x" not in {b.name for b in api.list_repo_refs(kernel_repo, repo_type="kernel").branches}
    api.create_branch(kernel_repo, repo_type="kernel", branch="v1", exist_ok=True)


def test_hf_hub_download_and_snapshot_download(api, kernel_repo, registry, tmp_path):
    cache = tmp_path / "cache"
    path = hf_hub_download(kernel_repo, "build/ir/softmax.nki", repo_type="kernel", revision="v1",
                           endpoint=registry.url, cache_dir=cache, token=False)
    assert Path(path).read_bytes() == b"kernel softmax\n"
    v1 = api.repo_info(kernel_repo, repo_type="kernel", revision="v1").sha
    assert f"snapshots/{v1}/" in path
    assert (cache / "kernels--acme--softmax" / "refs" / "v1").read_text() == v1
    snapshot = snapshot_download(kernel_repo, repo_type="kernel", revision="v1", endpoint=registry.url,
                                 cache_dir=tmp_path / "cache2", token=False)
    files = sorted(str(p.relative_to(snapshot)) for p in Path(snapshot).rglob("*") if p.is_file())
    assert files == [".gitattributes", "build/ir/softmax.nki", "manifest.json"]
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(kernel_repo, "nope.txt", repo_type="kernel", revision="v1", endpoint=registry.url,
                        cache_dir=cache, token=False)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(kernel_repo, "manifest.json", repo_type="kernel", revision="v7", endpoint=registry.url,
                        cache_dir=cache, token=False)


def test_file_exists_and_head_headers(api, kernel_repo, registry):
    assert api.file_exists(kernel_repo, "manifest.json", repo_type="kernel", revision="v1")
    assert not api.file_exists(kernel_repo, "manifest.json", repo_type="kernel")  # not on main
    v1 = api.repo_info(kernel_repo, repo_type="kernel", revision="v1").sha
    blob = git(repo_dir(registry, kernel_repo), "rev-parse", "v1:manifest.json").stdout.strip()
    head = raw_request(registry, "HEAD", "/kernels/acme/softmax/resolve/v1/manifest.json")
    assert head.status == 200 and head.body == b""
    assert head.headers["x-repo-commit"] == v1
    assert head.headers["etag"] == f'"{blob}"'
    assert head.headers["content-length"] == str(len(b'{"name": "softmax"}\n'))
    missing = raw_request(registry, "HEAD", "/kernels/acme/softmax/resolve/v1/nope")
    assert missing.status == 404 and missing.error_code == "EntryNotFound" and missing.headers["x-repo-commit"] == v1


def test_range_requests(kernel_repo, registry):
    path = "/kernels/acme/softmax/resolve/v1/build/ir/softmax.nki"
    whole = b"kernel softmax\n"
    part = raw_request(registry, "GET", path, headers={"Range": "bytes=7-"})
    assert part.status == 206 and part.body == whole[7:]
    assert part.headers["content-range"] == f"bytes 7-{len(whole) - 1}/{len(whole)}"
    assert raw_request(registry, "GET", path, headers={"Range": "bytes=0-5"}).body == whole[:6]
    assert raw_request(registry, "GET", path, headers={"Range": "bytes=-3"}).body == whole[-3:]
    beyond = raw_request(registry, "GET", path, headers={"Range": "bytes=100-"})
    assert beyond.status == 416 and beyond.headers["content-range"] == f"bytes */{len(whole)}"


def test_commit_deletes_files_and_folders(api, kernel_repo):
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="prune",
                      operations=[CommitOperationDelete("build/"), CommitOperationAdd("a/b/c.txt", b"c")])
    assert sorted(api.list_repo_files(kernel_repo, repo_type="kernel", revision="v1")) == [
        ".gitattributes", "a/b/c.txt", "manifest.json"]


def test_reupload_of_identical_files_is_a_no_op(api, kernel_repo):
    before = api.repo_info(kernel_repo, repo_type="kernel", revision="v1").sha
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="same again",
                      operations=[CommitOperationAdd("manifest.json", b'{"name": "softmax"}\n')])
    assert api.repo_info(kernel_repo, repo_type="kernel", revision="v1").sha == before


def test_organization_overview(api, kernel_repo):
    overview = api.get_organization_overview("acme")
    assert overview.name == "acme" and overview.trustedKernelPublisher is False and overview.numKernels == 1
    assert api.get_organization_overview("trusted").trustedKernelPublisher is True


def test_model_repos_use_unprefixed_urls(api, registry, tmp_path):
    api.create_repo("acme/plain-model")
    api.upload_file(path_or_fileobj=b"weights", path_in_repo="w.bin", repo_id="acme/plain-model")
    assert (registry.root / "models" / "acme" / "plain-model" / "HEAD").is_file()
    path = hf_hub_download("acme/plain-model", "w.bin", endpoint=registry.url, cache_dir=tmp_path / "c", token=False)
    assert Path(path).read_bytes() == b"weights"


def test_repos_are_real_git_and_survive_restart(api, kernel_repo, registry, hub_env, tmp_path):
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    bare = repo_dir(registry, kernel_repo)
    fsck = git(bare, "fsck", "--strict")
    assert fsck.returncode == 0, fsck.stderr
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "--quiet", "--branch", "v1", str(bare), str(clone)], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert (clone / "build" / "ir" / "softmax.nki").read_bytes() == b"kernel softmax\n"
    assert "publish v1.0.0" in subprocess.run(["git", "-C", str(clone), "log", "-1", "--format=%s"],
                                              capture_output=True, text=True).stdout
    registry.close()
    with serve(registry.root, tokens=[WRITE_TOKEN]) as again:
        response = raw_request(again, "GET", "/api/kernels/acme/softmax/refs")
        assert {tag["name"] for tag in response.json()["tags"]} == {"v1.0.0"}
        assert raw_request(again, "GET", "/kernels/acme/softmax/resolve/v1.0.0/manifest.json").status == 200


def test_empty_and_binary_files_round_trip(api, registry, tmp_path):
    payload = bytes(range(256)) * 4096  # 1 MiB, every byte value
    api.create_repo("acme/blobs", repo_type="kernel")
    api.create_commit("acme/blobs", repo_type="kernel", commit_message="blobs", operations=[
        CommitOperationAdd("empty.txt", b""), CommitOperationAdd("data/all-bytes.bin", payload)])
    for name, expected in (("empty.txt", b""), ("data/all-bytes.bin", payload)):
        path = hf_hub_download("acme/blobs", name, repo_type="kernel", endpoint=registry.url, token=False,
                               cache_dir=tmp_path / "cache")
        assert Path(path).read_bytes() == expected
    head = raw_request(registry, "HEAD", "/kernels/acme/blobs/resolve/main/empty.txt")
    assert head.status == 200 and head.headers["content-length"] == "0"


def test_delete_repo_and_protected_main(api, registry, kernel_repo):
    with pytest.raises(HfHubHTTPError) as caught:
        api.delete_branch(kernel_repo, repo_type="kernel", branch="main")
    assert caught.value.response.status_code == 403
    assert caught.value.response.headers.get("x-error-code") == "Forbidden"  # as for a read-only token's write
    api.delete_repo(kernel_repo, repo_type="kernel")
    assert not repo_dir(registry, kernel_repo).exists()
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info(kernel_repo, repo_type="kernel")
    api.create_repo(kernel_repo, repo_type="kernel")  # the name is free again


def test_unknown_endpoints_are_404_and_wrong_methods_405(registry):
    assert raw_request(registry, "GET", "/api/agent-harnesses").status == 404  # the client tolerates this 404
    wrong = raw_request(registry, "PUT", "/api/kernels/acme/softmax/refs")
    assert wrong.status in (405, 501)
    assert raw_request(registry, "DELETE", "/api/kernels/acme/softmax/refs").status == 405


def test_chunked_request_bodies_are_read(registry, kernel_repo):
    url = urlsplit(registry.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = ndjson({"key": "header", "value": {"summary": "chunked"}},
                  {"key": "file", "value": {"path": "chunked.txt", "content": "Y2h1bmtlZA==", "encoding": "base64"}})
    halves = iter([body[:40], body[40:]])
    connection.request("POST", "/api/kernels/acme/softmax/commit/v1", body=halves, encode_chunked=True,
                       headers={"Authorization": f"Bearer {WRITE_TOKEN}", "Transfer-Encoding": "chunked"})
    response = connection.getresponse()
    assert response.status == 200, response.read()
    connection.close()
    got = raw_request(registry, "GET", "/kernels/acme/softmax/resolve/v1/chunked.txt")
    assert got.body == b"chunked"
