"""A registry per test on 127.0.0.1 (ephemeral port, tmp_path root), the real huggingface_hub client pointed at it,
and a raw HTTP helper for requests the client would never send."""

from __future__ import annotations

import http.client
import json
import subprocess
from dataclasses import dataclass
from urllib.parse import urlsplit

import huggingface_hub
import pytest
from huggingface_hub import HfApi

from hub_client.server import serve

from .integrity import assert_fsck_clean

WRITE_TOKEN = "hf_write_test_token"
READ_TOKEN = "hf_read_test_token"


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """Keep huggingface_hub off the network and out of the user's cache and credentials.

    The client reads HF_* variables at import time, so besides the environment the matching module constants are
    pointed at tmp_path / the local server by `registry` below.
    """
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agent-harnesses.json"))
    return tmp_path


@pytest.fixture
def registry(hub_env, monkeypatch):
    server = serve(hub_env / "hub", tokens={WRITE_TOKEN: "write", READ_TOKEN: "read"}, trusted_publishers=["trusted"])
    # Anything the client sends to its default endpoint (agent detection, a forgotten endpoint=) lands here.
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", server.url)
    # hf_hub_url builds resolve URLs from this template, then swaps in `endpoint=` only if the template starts with
    # constants.ENDPOINT: both must move together or downloads head for the public Hub.
    monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        server.url + "/{repo_id}/resolve/{revision}/{filename}")
    yield server
    server.close()
    assert_fsck_clean(server.root)


@pytest.fixture
def api(registry) -> HfApi:
    return HfApi(endpoint=registry.url, token=WRITE_TOKEN)


@pytest.fixture
def kernel_repo(api) -> str:
    """A kernel repo `acme/softmax` with branch v1 holding a two-file commit."""
    api.create_repo("acme/softmax", repo_type="kernel")
    api.create_branch("acme/softmax", repo_type="kernel", branch="v1")
    api.create_commit(
        "acme/softmax",
        repo_type="kernel",
        revision="v1",
        commit_message="publish v1.0.0",
        operations=[
            huggingface_hub.CommitOperationAdd("build/ir/softmax.nki", b"kernel softmax\n"),
            huggingface_hub.CommitOperationAdd("manifest.json", b'{"name": "softmax"}\n'),
        ],
    )
    return "acme/softmax"


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def error_code(self) -> str | None:
        return self.headers.get("x-error-code")


def raw_request(server, method: str, path: str, body: bytes | dict | None = None, token: str | None = None,
                headers: dict[str, str] | None = None) -> RawResponse:
    """One request sent byte-for-byte as given: the path is not normalised or re-quoted."""
    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    sent = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return RawResponse(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def ndjson(*items: dict) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def git(repo_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={repo_dir}", *args], capture_output=True, text=True)


def repo_dir(server, repo_id: str, plural: str = "kernels"):
    return server.root / plural / repo_id
