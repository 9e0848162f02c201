"""Read endpoints: repo info, refs, tree listing, file resolve (HEAD/GET with Range), organisation overview."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote

from . import names, revisions
from .auth import ANONYMOUS, require_read
from .errors import HubError, bad_request, entry_not_found
from .protocol import Request, Response
from .registry import Registry, RepoHandle

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def open_readable(registry: Registry, request: Request) -> RepoHandle:
    """The repo named by the path parameters, if this caller may read it."""
    repo = registry.open(request.params["type"], request.params["org"], request.params["name"])
    require_read(request.identity, repo.private, repo.repo_id)
    return repo


def repo_info(registry: Registry, request: Request) -> Response:
    repo = open_readable(registry, request)
    revision = request.params.get("revision") or "main"
    commit = revisions.resolve(repo, revision)
    files = [entry for entry in repo.git.ls_tree(commit, recursive=True) if entry.type == "blob"]
    return Response.json({
        "id": repo.repo_id,
        "_id": repo.repo_id,
        "author": repo.org,
        "sha": commit,
        "private": repo.private,
        "gated": False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "lastModified": repo.git.commit_date(commit),
        "siblings": [{"rfilename": entry.path, "size": entry.size, "blobId": entry.oid} for entry in files],
    })


def list_refs(registry: Registry, request: Request) -> Response:
    return Response.json(revisions.list_refs(open_readable(registry, request)))


def tree(registry: Registry, request: Request) -> Response:
    """One directory (or, with ?recursive=true, the whole subtree) as the Hub's list of file/directory entries.

    The whole listing goes in one response; the Hub paginates at 1000 entries through a `Link` header, which the
    client follows only when present, and kernel bundles are far smaller than a page.
    """
    repo = open_readable(registry, request)
    commit = revisions.resolve(repo, request.params["revision"])
    path = request.params.get("path") or None
    if path is not None:
        names.path_in_repo(path)
        target = repo.git.object_at(commit, path)
        if target is None or target.type != "tree":
            raise entry_not_found(repo.repo_id, path, commit)
    entries = []
    for entry in repo.git.ls_tree(commit, path, recursive=request.flag("recursive")):
        if entry.type == "blob":
            entries.append({"type": "file", "oid": entry.oid, "size": entry.size, "path": entry.path})
        elif entry.type == "tree":
            entries.append({"type": "directory", "oid": entry.oid, "path": entry.path})
    return Response.json(entries)


MAX_PATHS_INFO = 1000  # paths one paths-info request may ask about (a bounded amount of work per request)
COMMITS_PER_PAGE = 50  # the Hub's page size for commit listings; the next page is named in a Link header


def _entry(entry) -> dict:
    if entry.type == "blob":
        return {"type": "file", "oid": entry.oid, "size": entry.size, "path": entry.path}
    return {"type": "directory", "oid": entry.oid, "path": entry.path}


def _requested_paths(request: Request) -> list[str]:
    """The ``paths`` of a paths-info body: a form (what huggingface_hub sends) or a JSON object."""
    if request.headers.get("content-type", "").startswith("application/json"):
        paths = request.json().get("paths", [])
    else:
        request.body.seek(0)
        raw = request.body.read(MAX_PATHS_INFO * 1024 + 1)  # the body is already bounded by Limits.max_json_body
        try:
            form = parse_qsl(raw.decode("utf-8", errors="strict"), keep_blank_values=True, strict_parsing=False,
                             max_num_fields=MAX_PATHS_INFO + 1)  # fmt: skip
        except (UnicodeDecodeError, ValueError):
            raise bad_request("paths-info body must be a form or a JSON object with a list of paths") from None
        paths = [value for key, value in form if key == "paths"]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise bad_request("paths-info: paths must be a list of strings")
    if len(paths) > MAX_PATHS_INFO:
        raise bad_request(f"paths-info: at most {MAX_PATHS_INFO} paths per request")
    return [names.path_in_repo(p) for p in paths]


def paths_info(registry: Registry, request: Request) -> Response:
    """The tree entry of each requested path at a revision (``get_paths_info``); paths that do not exist are left
    out, as the Hub does."""
    repo = open_readable(registry, request)
    commit = revisions.resolve(repo, request.params["revision"])
    paths = _requested_paths(request)
    found = repo.git.objects_at(commit, paths)
    return Response.json([_entry(e) for e in found if e is not None], headers={"X-Repo-Commit": commit})


def list_commits(registry: Registry, request: Request) -> Response:
    """Commits reachable from a revision, newest first (``list_repo_commits``), one page per request."""
    repo = open_readable(registry, request)
    commit = revisions.resolve(repo, request.params["revision"])
    page = request.query.get("p", "0")
    if not re.fullmatch(r"[0-9]{1,6}", page):  # ASCII digits: str.isdigit also takes '²', which int() refuses (a 500)
        raise bad_request(f"Invalid page {page[:20]!r}")
    page = int(page)
    items = repo.git.log(commit, page * COMMITS_PER_PAGE, COMMITS_PER_PAGE + 1)
    body = [{"id": c["id"], "title": c["title"], "message": c["message"], "date": c["date"],
             "authors": [{"user": c["author"]}]} for c in items[:COMMITS_PER_PAGE]]  # fmt: skip
    headers = {}
    if len(items) > COMMITS_PER_PAGE:
        revision = quote(request.params["revision"], safe="")
        url = f"{request.base_url}/api/{names.REPO_TYPES[repo.type]}/{repo.repo_id}/commits/{revision}"
        headers["Link"] = f'<{url}?p={page + 1}>; rel="next"'
    return Response.json(body, headers=headers)


def resolve_file(registry: Registry, request: Request) -> Response:
    """HEAD or GET of a file at a revision: bytes plus the headers hf_hub_download needs to cache them.

    `X-Repo-Commit` is the resolved commit (the client files the blob under snapshots/<commit>); `ETag` is the
    git blob id, which is also the blob's name in the client cache. A single byte range is honoured so an
    interrupted download can resume.
    """
    repo = open_readable(registry, request)
    commit = revisions.resolve(repo, request.params["revision"])
    path = names.path_in_repo(request.params["path"])
    entry = repo.git.object_at(commit, path)
    if entry is None or entry.type != "blob":
        raise entry_not_found(repo.repo_id, path, commit)
    headers = {
        "X-Repo-Commit": commit,
        "ETag": f'"{entry.oid}"',
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
        "Content-Disposition": f'inline; filename="{path.rsplit("/", 1)[-1]}"',
    }
    head_only = request.method == "HEAD"
    size = entry.size or 0
    byte_range = _parse_range(request.headers.get("range"), size)
    start, stop, status = 0, size, 200
    if byte_range is not None:
        (start, stop), status = byte_range, 206
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
    headers["Content-Length"] = str(stop - start)
    stream = None if head_only else (lambda: repo.git.stream_blob(entry.oid, start, stop))
    return Response(status, b"", headers, send_body=not head_only, stream=stream)


def _parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """A single `bytes=a-b` / `bytes=a-` / `bytes=-n` range as [start, stop); None means the whole file."""
    if not header:
        return None
    match = _RANGE.fullmatch(header.strip())
    if not match or match.groups() == ("", ""):
        return None  # multi-range or malformed: RFC 9110 lets a server ignore it and send the whole file
    first, last = match.groups()
    if first == "":
        start, stop = max(size - int(last), 0), size
    else:
        start, stop = int(first), size if last == "" else min(int(last) + 1, size)
    if start >= size or start >= stop:
        if size == 0 and start == 0:
            return None
        unsatisfiable = {"Content-Range": f"bytes */{size}"}
        raise HubError(416, f"Range {header!r} is outside a {size}-byte file", None, unsatisfiable)
    return start, stop


def organization_overview(registry: Registry, request: Request) -> Response:
    org = request.params["org"]
    counts = registry.organization(org, include_private=request.identity is not ANONYMOUS)
    if counts is None:
        raise HubError(404, f"Organization not found: {org}")
    return Response.json({
        "name": org,
        "fullname": org,
        "avatarUrl": "",
        "isVerified": False,
        "numModels": counts["model"],
        "numDatasets": counts["dataset"],
        "numSpaces": counts["space"],
        "numKernels": counts["kernel"],
        # The HF `kernels` library loads remote code from a publisher only if this is true (its trust gate).
        "trustedKernelPublisher": org in registry.trusted_publishers,
    })
