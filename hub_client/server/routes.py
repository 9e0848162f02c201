"""The route table: (method, URL pattern) -> API function. One place lists every endpoint the registry serves.

Patterns match the raw, still percent-encoded path, one segment per parameter; each parameter is decoded
afterwards. huggingface_hub quotes revisions (and tree paths) with `safe=""`, so a branch `feature/x` arrives
as the single segment `feature%2Fx`, while resolve paths keep their '/' separators.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

from . import api_account, api_read, api_write
from .errors import HubError, bad_request
from .names import PLURAL_TO_TYPE

_TYPE = r"(?P<type>models|datasets|spaces|kernels)"
_REPO = r"(?P<org>[^/]+)/(?P<name>[^/]+)"
_API = rf"/api/{_TYPE}/{_REPO}"
_SEGMENT = r"[^/]+"


@dataclass(frozen=True)
class Route:
    methods: tuple[str, ...]
    pattern: re.Pattern
    handler: Callable
    # Known from the route alone, so the HTTP layer checks the token before it reads a byte of the body.
    needs_write: bool = False
    large_body: bool = False  # a commit: up to Limits.max_commit_body; every other body is small JSON


def _route(methods: str, pattern: str, handler: Callable, write: bool = False, large_body: bool = False) -> Route:
    return Route(tuple(methods.split("|")), re.compile(pattern), handler, write, large_body)


# Every read route answers HEAD as well as GET (the same status and headers, no body): a caching mirror (olah) asks
# HEAD /api/<type>s/<repo>/... before it proxies or serves from its cache.
ROUTES = [
    _route("POST", r"/api/repos/create", api_write.create_repo, write=True),
    _route("DELETE", r"/api/repos/delete", api_write.delete_repo, write=True),
    _route("POST", r"/api/validate-yaml", api_account.validate_yaml),
    _route("GET|HEAD", r"/api/whoami-v2", api_account.whoami),
    _route("GET|HEAD", rf"/api/organizations/(?P<org>{_SEGMENT})/overview", api_read.organization_overview),
    _route("GET|HEAD", _API, api_read.repo_info),
    _route("GET|HEAD", rf"{_API}/revision/(?P<revision>{_SEGMENT})", api_read.repo_info),
    _route("GET|HEAD", rf"{_API}/refs", api_read.list_refs),
    _route("GET|HEAD", rf"{_API}/tree/(?P<revision>{_SEGMENT})(?:/(?P<path>.*))?", api_read.tree),
    _route("POST", rf"{_API}/paths-info/(?P<revision>{_SEGMENT})", api_read.paths_info),
    _route("GET|HEAD", rf"{_API}/commits/(?P<revision>{_SEGMENT})", api_read.list_commits),
    _route("POST", rf"{_API}/preupload/(?P<revision>{_SEGMENT})", api_write.preupload, write=True),
    _route("POST", rf"{_API}/commit/(?P<revision>{_SEGMENT})", api_write.commit, write=True, large_body=True),
    _route("POST", rf"{_API}/branch/(?P<branch>{_SEGMENT})", api_write.create_branch, write=True),
    _route("DELETE", rf"{_API}/branch/(?P<branch>{_SEGMENT})", api_write.delete_branch, write=True),
    _route("POST", rf"{_API}/tag/(?P<revision>{_SEGMENT})", api_write.create_tag, write=True),
    _route("DELETE", rf"{_API}/tag/(?P<tag>{_SEGMENT})", api_write.delete_tag, write=True),
    # File downloads: /<org>/<name>/resolve/... for models, /<plural>/<org>/<name>/resolve/... otherwise.
    _route(
        "GET|HEAD",
        rf"/(?:(?P<type>datasets|spaces|kernels)/)?{_REPO}/resolve/(?P<revision>{_SEGMENT})/(?P<path>.*)",
        api_read.resolve_file,
    ),
]


def match(method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
    """The handler and decoded parameters for a request; 404 if no route, 405 if the path exists but not the method."""
    allowed = []
    for route in ROUTES:
        found = route.pattern.fullmatch(raw_path)
        if found is None:
            continue
        if method not in route.methods:
            allowed.extend(route.methods)
            continue
        return route, _decode(found.groupdict())
    if allowed:
        raise HubError(405, f"Method {method} not allowed here", None, {"Allow": ", ".join(sorted(set(allowed)))})
    raise HubError(404, f"No such endpoint: {method} {raw_path}")


def _decode(groups: dict[str, str | None]) -> dict[str, str]:
    params = {}
    for key, value in groups.items():
        if value is None:
            continue
        try:
            params[key] = unquote(value, errors="strict")
        except UnicodeDecodeError:
            raise bad_request(f"Path parameter {key} is not valid UTF-8") from None
    # Resolve URLs of models carry no type prefix; API URLs carry the plural form.
    params["type"] = PLURAL_TO_TYPE.get(params.get("type", "models"), "model")
    return params
