"""Endpoints about the caller rather than a repo: whoami and the README metadata check."""

from __future__ import annotations

import yaml  # a dependency of huggingface_hub, which this package requires

from .auth import ANONYMOUS
from .errors import BAD_CREDENTIALS, HubError
from .protocol import Request, Response


def whoami(registry, request: Request) -> Response:
    if request.identity is ANONYMOUS:
        raise HubError(401, BAD_CREDENTIALS)
    role = "write" if request.identity.can_write else "read"
    return Response.json({
        "type": "user",
        "name": request.identity.user,
        "fullname": request.identity.user,
        "orgs": [],
        "auth": {"type": "access_token", "accessToken": {"displayName": request.identity.user, "role": role}},
    })


def validate_yaml(registry, request: Request) -> Response:
    """huggingface_hub sends a README's YAML front matter here before committing it; report YAML syntax errors.

    The Hub also checks metadata fields against its schemas; this registry checks only that the block parses.
    """
    content = request.json().get("content")
    errors = []
    lines = content.splitlines() if isinstance(content, str) else []
    if lines and lines[0].strip() == "---":
        closing = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        if closing is None:
            errors.append({"message": "YAML metadata block is not closed with '---'"})
        else:
            try:
                yaml.safe_load("\n".join(lines[1:closing]))
            except yaml.YAMLError as exc:
                errors.append({"message": f"Invalid YAML in the metadata block: {exc}"})
    # The client reads `errors` from a 400 and raises ValueError("Invalid metadata in README.md ...").
    return Response.json({"errors": errors, "warnings": []}, status=400 if errors else 200)
