"""Write endpoints: create/delete repo, preupload, commit, create/delete branch and tag.

Every ref change is a compare-and-swap (`GitRepo.update_ref`). A commit that names its `parentCommit` must find
the branch still there (412 otherwise, nothing written); a commit without one is rebased onto whatever the
branch holds when it lands, retrying the swap, as the Hub serialises commits to a branch. Tags are immutable:
creating one that exists is a 409, and the swap from "absent" decides which of two racing creators wins.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from . import names, revisions
from .api_read import open_readable
from .auth import Identity, require_write
from .commits import AddFile, apply_operations, parse_commit_payload, write_trees
from .errors import HubError, bad_request, conflict, revision_not_found
from .gitstore import ZERO_OID, Author, GitError
from .protocol import Request, Response
from .registry import Registry, RepoHandle, now_epoch

_MAX_REBASES = 100  # a commit without parentCommit retries its swap this often before giving up with a 409


def author_of(identity: Identity) -> Author:
    return Author(identity.user, f"{identity.user}@registry.invalid")


def open_writable(registry: Registry, request: Request) -> RepoHandle:
    require_write(request.identity)
    return open_readable(registry, request)


def repo_url(request: Request, repo_type: str, repo_id: str) -> str:
    return f"{request.base_url}/{names.URL_PREFIX[repo_type]}{repo_id}"


def _org_and_name(body: dict) -> tuple:
    """A create or delete body names the repo as `organization` + `name`, or as a whole `org/name` in `name`."""
    org, name = body.get("organization"), body.get("name")
    if not org and isinstance(name, str) and "/" in name:
        org, name = name.split("/", 1)
    return org, name


def create_repo(registry: Registry, request: Request) -> Response:
    require_write(request.identity)
    body = request.json()
    repo_type = names.repo_type(body.get("type"))
    org, name = _org_and_name(body)
    if not org:
        raise bad_request("This registry needs an organization for every repo (`org/name`)")
    private = body.get("visibility") == "private" or body.get("private") is True
    try:
        repo = registry.create(repo_type, org, name, private, author_of(request.identity))
    except HubError as error:
        if error.status == 409:  # huggingface_hub's create_repo(exist_ok=True) reads `url` from the 409 body
            error.extra["url"] = repo_url(request, repo_type, f"{org}/{name}")
        raise
    return Response.json({"url": repo_url(request, repo.type, repo.repo_id), "name": repo.repo_id, "id": repo.repo_id})


def delete_repo(registry: Registry, request: Request) -> Response:
    require_write(request.identity)
    body = request.json()
    org, name = _org_and_name(body)
    repo = registry.open(names.repo_type(body.get("type")), str(org or ""), str(name or ""))
    with registry.write_lock(repo):
        registry.delete(repo)
    return Response.json({})


def preupload(registry: Registry, request: Request) -> Response:
    """Every file is uploaded "regular" (inline in the commit), so no LFS or Xet transfer is ever needed.

    `oid` is the blob currently at that path on the branch; the client drops an upload whose local git blob id
    equals it, which makes re-publishing identical files a no-op.
    """
    repo = open_writable(registry, request)
    head = revisions.branch_head(repo, request.params["revision"])
    files = request.json().get("files")
    if not isinstance(files, list):
        raise bad_request("preupload expects {'files': [...]}")
    paths = [names.path_in_repo(item.get("path") if isinstance(item, dict) else None) for item in files]
    answers = []
    for path, existing in zip(paths, repo.git.objects_at(head, paths)):
        answers.append({
            "path": path,
            "uploadMode": "regular",
            "shouldIgnore": False,
            "oid": existing.oid if existing is not None and existing.type == "blob" else None,
        })
    return Response.json({"files": answers})


def commit(registry: Registry, request: Request) -> Response:
    repo = open_writable(registry, request)
    branch = request.params["revision"]
    if request.flag("create_pr"):
        raise bad_request("Pull requests are not supported by this registry")
    with tempfile.TemporaryDirectory(prefix="commit-", dir=registry.scratch) as staging:
        # Validates every line before anything is written; file contents go to `staging`, not to memory.
        payload = parse_commit_payload(request.body, Path(staging), registry.limits.max_commit_line_metadata)
        request.body.close()  # the spooled body is no longer needed: do not hold its disk space during git work
        return _land_commit(registry, request, repo, branch, payload)


def _land_commit(registry: Registry, request: Request, repo: RepoHandle, branch: str, payload) -> Response:
    ref = f"refs/heads/{branch}"
    adds = [op for op in payload.operations if isinstance(op, AddFile)]
    with registry.write_lock(repo):
        head = revisions.branch_head(repo, branch)
        if payload.parent_commit is not None and payload.parent_commit != head:
            raise _parent_moved(branch, payload.parent_commit, head)
        plan = apply_operations(repo.git, head, payload.operations)  # every refusal happens before any write
        stored = repo.git.write_blob_files([op.blob.file for op in adds])
        if stored != [op.blob.oid for op in adds]:
            raise GitError("git stored blobs under ids other than the computed ones")
        for _ in range(_MAX_REBASES):
            tree = write_trees(repo.git, plan)
            new = repo.git.commit_tree(tree, [head], payload.message, author_of(request.identity))
            if repo.git.update_ref(ref, new, head):
                break
            # Another writer (another server process on this root) moved the branch between our read and swap.
            moved_to = revisions.branch_head(repo, branch)
            if payload.parent_commit is not None:
                raise _parent_moved(branch, payload.parent_commit, moved_to)
            head = moved_to
            plan = apply_operations(repo.git, head, payload.operations)
        else:
            raise conflict(f"Branch {branch!r} kept moving; commit not applied")
    return Response.json({
        "commitUrl": f"{repo_url(request, repo.type, repo.repo_id)}/commit/{new}",
        "commitOid": new,
        "pullRequestUrl": None,
        "success": True,
    })


def _parent_moved(branch: str, expected: str, actual: str) -> HubError:
    return HubError(412, f"Branch {branch!r} is at {actual}, not at the parent commit {expected}", "PreconditionFailed")


def create_branch(registry: Registry, request: Request) -> Response:
    repo = open_writable(registry, request)
    branch = names.ref_name(request.params["branch"], "branch")
    if branch.startswith("refs/"):
        raise bad_request(f"Invalid branch name {branch!r}: 'refs/' names are reserved")
    start = request.json().get("startingPoint") or "main"
    commit_oid = revisions.resolve(repo, str(start))
    if not repo.git.update_ref(f"refs/heads/{branch}", commit_oid, ZERO_OID):
        raise conflict(f"Branch {branch!r} already exists")
    return Response.json({})


def delete_branch(registry: Registry, request: Request) -> Response:
    repo = open_writable(registry, request)
    branch = names.ref_name(request.params["branch"], "branch")
    if branch == "main":
        raise HubError(403, "The main branch cannot be deleted", "Forbidden")
    head = revisions.branch_head(repo, branch)
    if not repo.git.delete_ref(f"refs/heads/{branch}", head):
        raise conflict(f"Branch {branch!r} moved while being deleted")
    return Response.json({})


def create_tag(registry: Registry, request: Request) -> Response:
    repo = open_writable(registry, request)
    body = request.json()
    tag = names.ref_name(body.get("tag"), "tag")
    commit_oid = revisions.resolve(repo, request.params["revision"])
    target = commit_oid
    if body.get("message"):
        target = repo.git.mktag(commit_oid, tag, str(body["message"]), author_of(request.identity), now_epoch())
    if not repo.git.update_ref(f"refs/tags/{tag}", target, ZERO_OID):
        raise conflict(f"Tag {tag!r} already exists; tags are immutable")
    return Response.json({})


def delete_tag(registry: Registry, request: Request) -> Response:
    repo = open_writable(registry, request)
    tag = names.ref_name(request.params["tag"], "tag")
    current = repo.git.ref_oid(f"refs/tags/{tag}")
    if current is None:
        raise revision_not_found(repo.repo_id, tag)
    if not repo.git.delete_ref(f"refs/tags/{tag}", current):
        raise conflict(f"Tag {tag!r} changed while being deleted")
    return Response.json({})
