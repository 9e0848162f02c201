"""Ref listings are cached only while the ref files are unchanged: writes by anyone show up on the next request."""

import subprocess


def _branches(api):
    return {b.name: b.target_commit for b in api.list_repo_refs("acme/softmax", repo_type="kernel").branches}


def test_refs_written_by_git_itself_are_seen_at_once(api, registry, kernel_repo):
    before = _branches(api)
    git_dir = registry.root / "kernels" / "acme" / "softmax"
    subprocess.run(["git", f"--git-dir={git_dir}", "update-ref", "refs/heads/side", before["v1"]], check=True)
    assert _branches(api)["side"] == before["v1"]
    subprocess.run(["git", f"--git-dir={git_dir}", "pack-refs", "--all"], check=True)  # loose refs -> packed-refs
    assert _branches(api) == {**before, "side": before["v1"]}
    subprocess.run(["git", f"--git-dir={git_dir}", "update-ref", "-d", "refs/heads/side"], check=True)
    assert _branches(api) == before


def test_quick_successive_commits_each_move_the_listed_head(api, kernel_repo):
    from huggingface_hub import CommitOperationAdd

    for i in range(5):  # faster than file timestamps tick: the listing must still follow each one
        info = api.create_commit("acme/softmax", [CommitOperationAdd(f"f{i}.txt", str(i).encode())],
                                 commit_message=str(i), repo_type="kernel", revision="v1")  # fmt: skip
        assert _branches(api)["v1"] == info.oid
