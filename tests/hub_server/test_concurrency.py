"""Optimistic concurrency: parentCommit mismatches are 412, tags are immutable, racing writers get one winner."""

from __future__ import annotations

import base64
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from huggingface_hub import CommitOperationAdd
from huggingface_hub.errors import HfHubHTTPError

from hub_client.server import serve

from .conftest import WRITE_TOKEN, git, ndjson, raw_request, repo_dir


def _head(registry, branch="v1"):
    return raw_request(registry, "GET", "/api/kernels/acme/softmax/revision/" + branch).json()["sha"]


def _commit_body(path: str, content: bytes, parent: str | None = None) -> bytes:
    header = {"summary": f"add {path}"}
    if parent:
        header["parentCommit"] = parent
    return ndjson({"key": "header", "value": header},
                  {"key": "file", "value": {"path": path, "content": base64.b64encode(content).decode(),
                                            "encoding": "base64"}})


def _race(count: int, action):
    """Run `action(i)` on `count` threads released together; returns their results in order."""
    barrier = threading.Barrier(count)

    def run(index):
        barrier.wait()
        return action(index)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_commit_with_a_stale_parent_is_412_and_writes_nothing(api, registry, kernel_repo):
    stale = _head(registry)
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="move",
                      operations=[CommitOperationAdd("moved.txt", b"moved")])
    bare = repo_dir(registry, kernel_repo)
    before = git(bare, "for-each-ref").stdout, git(bare, "count-objects").stdout
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="stale",
                          operations=[CommitOperationAdd("stale.txt", b"stale")], parent_commit=stale)
    assert caught.value.response.status_code == 412
    assert (git(bare, "for-each-ref").stdout, git(bare, "count-objects").stdout) == before
    raw = raw_request(registry, "POST", "/api/kernels/acme/softmax/commit/v1", _commit_body("x.txt", b"x", stale),
                      token=WRITE_TOKEN)
    assert raw.status == 412 and raw.headers["x-error-message"]


def test_commit_with_the_current_parent_lands(api, registry, kernel_repo):
    current = _head(registry)
    info = api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="on top",
                             operations=[CommitOperationAdd("next.txt", b"next")], parent_commit=current)
    assert _head(registry) == info.oid
    assert git(repo_dir(registry, kernel_repo), "rev-parse", f"{info.oid}^").stdout.strip() == current


def test_tags_are_immutable(api, registry, kernel_repo):
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="later",
                      operations=[CommitOperationAdd("later.txt", b"later")])
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    assert caught.value.response.status_code == 409
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1", exist_ok=True)  # still no move
    tags = {t.name: t.target_commit for t in api.list_repo_refs(kernel_repo, repo_type="kernel").tags}
    assert tags["v1.0.0"] != _head(registry)
    duplicate = raw_request(registry, "POST", "/api/kernels/acme/softmax/tag/main", {"tag": "v1.0.0"},
                            token=WRITE_TOKEN)
    assert duplicate.status == 409 and "immutable" in duplicate.headers["x-error-message"]


def test_existing_branch_is_409(api, kernel_repo):
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_branch(kernel_repo, repo_type="kernel", branch="v1")
    assert caught.value.response.status_code == 409


def test_racing_tag_creators_one_wins(api, registry, kernel_repo):
    commits = [_head(registry, "main"), _head(registry, "v1")]

    def create(index):
        return raw_request(registry, "POST", f"/api/kernels/acme/softmax/tag/{commits[index % 2]}",
                           {"tag": "v1.2.0"}, token=WRITE_TOKEN).status

    statuses = _race(8, create)
    assert sorted(statuses) == [200] + [409] * 7
    winner = commits[statuses.index(200) % 2]
    tags = {t.name: t.target_commit for t in api.list_repo_refs(kernel_repo, repo_type="kernel").tags}
    assert tags == {"v1.2.0": winner}


def test_racing_commits_on_the_same_parent_one_wins(registry, kernel_repo):
    parent = _head(registry)

    def commit(index):
        return raw_request(registry, "POST", "/api/kernels/acme/softmax/commit/v1",
                           _commit_body(f"racer-{index}.txt", b"%d" % index, parent), token=WRITE_TOKEN)

    responses = _race(8, commit)
    statuses = sorted(response.status for response in responses)
    assert statuses == [200] + [412] * 7
    winner = next(response.json()["commitOid"] for response in responses if response.status == 200)
    assert _head(registry) == winner
    files = git(repo_dir(registry, kernel_repo), "ls-tree", "--name-only", "v1").stdout.split()
    assert len([name for name in files if name.startswith("racer-")]) == 1


def test_racing_commits_without_parent_all_land_in_order(registry, kernel_repo):
    def commit(index):
        return raw_request(registry, "POST", "/api/kernels/acme/softmax/commit/v1",
                           _commit_body(f"many/{index}.txt", b"%d" % index), token=WRITE_TOKEN).status

    assert _race(8, commit) == [200] * 8
    bare = repo_dir(registry, kernel_repo)
    assert len(git(bare, "ls-tree", "--name-only", "v1:many").stdout.split()) == 8
    assert git(bare, "rev-list", "--count", "v1").stdout.strip() == "10"  # initial + publish + 8, one line
    assert git(bare, "fsck", "--strict").returncode == 0


def test_two_server_processes_on_one_root_still_have_one_winner(registry, kernel_repo):
    """The per-process write lock is only an optimisation; git's ref compare-and-swap decides across servers."""
    with serve(registry.root, tokens=[WRITE_TOKEN]) as other:
        servers = [registry, other]
        parent = _head(registry)

        def commit(index):
            return raw_request(servers[index % 2], "POST", "/api/kernels/acme/softmax/commit/v1",
                               _commit_body(f"cross-{index}.txt", b"x", parent), token=WRITE_TOKEN).status

        assert sorted(_race(8, commit)) == [200] + [412] * 7

        def tag(index):
            return raw_request(servers[index % 2], "POST", "/api/kernels/acme/softmax/tag/v1",
                               {"tag": "v1.9.0"}, token=WRITE_TOKEN).status

        assert sorted(_race(8, tag)) == [200] + [409] * 7


def test_racing_repo_creation_one_wins(registry):
    def create(index):
        return raw_request(registry, "POST", "/api/repos/create",
                           {"name": "contested", "organization": "acme", "type": "kernel"}, token=WRITE_TOKEN).status

    assert sorted(_race(8, create)) == [200] + [409] * 7
    assert git(registry.root / "kernels" / "acme" / "contested", "fsck").returncode == 0
    assert [p.name for p in (registry.root / ".tmp").iterdir()] == []  # no half-built repo left behind
