"""Turning a revision a client names (branch, tag or full commit id) into a commit, and listing refs."""

from __future__ import annotations

from . import names, refcache
from .errors import revision_not_found
from .registry import RepoHandle


def resolve(repo: RepoHandle, revision: str) -> str:
    """Branch first, then tag, then a full 40-hex commit id, as the Hub resolves them. A full ref name
    (``refs/heads/v1``, ``refs/tags/v1.0.0``: what ``list_repo_refs`` reports as a ref's ``ref``, and what HF kernels
    passes back as the revision) names that one ref."""
    if names.FULL_SHA.fullmatch(revision):
        if repo.git.has_commit(revision):
            return revision
        raise revision_not_found(repo.repo_id, revision)
    kind = next((k for k in _QUALIFIED if revision.startswith(k)), None)
    names.ref_name(revision.removeprefix(kind) if kind else revision)
    refs = refcache.refs(repo.git)
    for ref in [revision] if kind else [f"refs/heads/{revision}", f"refs/tags/{revision}"]:
        if ref in refs:
            return refs[ref]
    raise revision_not_found(repo.repo_id, revision)


_QUALIFIED = ("refs/heads/", "refs/tags/")


def branch_head(repo: RepoHandle, branch: str) -> str:
    """The commit a branch points at; commits and preuploads may only target branches."""
    names.ref_name(branch, "branch")
    head = repo.git.ref_oid(f"refs/heads/{branch}")
    if head is None:
        raise revision_not_found(repo.repo_id, branch)
    return head


def list_refs(repo: RepoHandle) -> dict[str, list[dict[str, str]]]:
    branches, tags = [], []
    for ref, commit in sorted(refcache.refs(repo.git).items()):
        kind, _, name = ref.removeprefix("refs/").partition("/")
        entry = {"name": name, "ref": ref, "targetCommit": commit}
        (branches if kind == "heads" else tags).append(entry)
    return {"branches": branches, "tags": tags, "converts": [], "pullRequests": []}
