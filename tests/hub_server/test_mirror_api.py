"""The Hub API a caching mirror (olah) needs besides downloads: HEAD on the API routes, paths-info, the commit
listing, and revisions given as full ref names (``refs/heads/v1``, which HF kernels passes back from the refs)."""

import huggingface_hub
import pytest
from huggingface_hub import RepoFile, RepoFolder
from huggingface_hub.errors import RevisionNotFoundError

from hub_client.server import api_read

from .conftest import raw_request


def test_head_answers_every_read_api_route_like_get(registry, kernel_repo):
    for path in (f"/api/kernels/{kernel_repo}", f"/api/kernels/{kernel_repo}/revision/v1",
                 f"/api/kernels/{kernel_repo}/refs", f"/api/kernels/{kernel_repo}/tree/v1",
                 f"/api/kernels/{kernel_repo}/commits/v1", "/api/organizations/acme/overview"):  # fmt: skip
        got, head = raw_request(registry, "GET", path), raw_request(registry, "HEAD", path)
        assert got.status == head.status == 200, path
        assert head.body == b"" and head.headers["content-length"] == str(len(got.body))
        assert head.headers["content-type"] == got.headers["content-type"] == "application/json"
    missing = raw_request(registry, "HEAD", "/api/kernels/acme/nothing")
    assert missing.status == 404 and missing.error_code == "RepoNotFound" and missing.body == b""


def test_paths_info_with_the_real_client(api, kernel_repo):
    info = api.get_paths_info(kernel_repo, ["manifest.json", "build", "build/ir/softmax.nki", "absent.txt"],
                              repo_type="kernel", revision="v1")  # fmt: skip
    by_path = {e.path: e for e in info}
    assert set(by_path) == {"manifest.json", "build", "build/ir/softmax.nki"}  # absent paths are left out
    assert isinstance(by_path["build"], RepoFolder) and isinstance(by_path["manifest.json"], RepoFile)
    tree = {e.path: e for e in api.list_repo_tree(kernel_repo, repo_type="kernel", revision="v1", recursive=True)}
    assert by_path["manifest.json"].blob_id == tree["manifest.json"].blob_id
    assert by_path["manifest.json"].size == len(b'{"name": "softmax"}\n')
    assert by_path["build"].tree_id == tree["build"].tree_id


def test_paths_info_refuses_bad_requests(registry, kernel_repo, api):
    url = f"/api/kernels/{kernel_repo}/paths-info/v1"
    assert raw_request(registry, "POST", url, {"paths": "manifest.json"}).status == 400  # not a list
    assert raw_request(registry, "POST", url, {"paths": ["../etc/passwd"]}).status == 400
    too_many = {"paths": ["manifest.json"] * (api_read.MAX_PATHS_INFO + 1)}
    assert raw_request(registry, "POST", url, too_many).status == 400
    with pytest.raises(RevisionNotFoundError):
        api.get_paths_info(kernel_repo, ["manifest.json"], repo_type="kernel", revision="v9")


def test_list_repo_commits_pages_through_history(registry, api, kernel_repo, monkeypatch):
    for i in range(3):
        api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message=f"change {i}",
                          operations=[huggingface_hub.CommitOperationAdd(f"f{i}.txt", b"x%d" % i)])  # fmt: skip
    monkeypatch.setattr(api_read, "COMMITS_PER_PAGE", 2)  # force the Link-header pagination
    commits = api.list_repo_commits(kernel_repo, repo_type="kernel", revision="v1")
    assert [c.title for c in commits[:4]] == ["change 2", "change 1", "change 0", "publish v1.0.0"]
    refs = api.list_repo_refs(kernel_repo, repo_type="kernel")
    assert commits[0].commit_id == next(b.target_commit for b in refs.branches if b.name == "v1")
    assert len({c.commit_id for c in commits}) == len(commits) and all(c.authors for c in commits)
    assert raw_request(registry, "GET", f"/api/kernels/{kernel_repo}/commits/v1?p=x").status == 400


def test_full_ref_names_resolve_to_that_ref_only(api, kernel_repo):
    refs = api.list_repo_refs(kernel_repo, repo_type="kernel")
    v1 = next(b for b in refs.branches if b.name == "v1")
    assert v1.ref == "refs/heads/v1"
    files = api.list_repo_files(kernel_repo, repo_type="kernel", revision=v1.ref)  # what `kernels versions` asks
    assert "manifest.json" in files
    assert api.repo_info(kernel_repo, repo_type="kernel", revision="refs/heads/v1").sha == v1.target_commit
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    assert api.repo_info(kernel_repo, repo_type="kernel", revision="refs/tags/v1.0.0").sha == v1.target_commit
    for wrong in ("refs/tags/v1", "refs/heads/v1.0.0", "refs/heads/", "refs/heads/../v1", "refs/remotes/v1"):
        with pytest.raises((RevisionNotFoundError, huggingface_hub.errors.HfHubHTTPError)):
            api.repo_info(kernel_repo, repo_type="kernel", revision=wrong)


@pytest.mark.parametrize("page", ["%C2%B2", "%D9%A1", "-1", "1234567", "", "1.0", "%201"])
def test_a_page_that_is_not_ascii_digits_is_a_400(registry, kernel_repo, page):
    # '²' passed str.isdigit and then int() raised: a 500 from the commit listing
    got = raw_request(registry, "GET", f"/api/kernels/{kernel_repo}/commits/v1?p={page}")
    assert got.status == 400 and b"Invalid page" in got.body
