"""Every Hub failure reaches the user as a KernelHubError subclass naming the repo, the revision and what to do,
and the CLI prints it styled, with the message itself verbatim (never parsed as rich markup)."""

import io

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from rich.console import Console

import kernels
from hub_client import cli
from hub_client.cli import main
from hub_client.publish import publish
from tests.hub.conftest import SOFTMAX, TOKEN, settings


@pytest.fixture
def published(registry, softmax_bundle):
    return publish(softmax_bundle, "acme/softmax", settings())


@pytest.mark.parametrize("call", ["get_kernel", "has_kernel"])
def test_a_wrong_token_on_read_says_which_token_and_what_to_do(published, monkeypatch, call):
    monkeypatch.setenv("HF_TOKEN", "not-a-token")
    with pytest.raises(kernels.AuthenticationError) as e:
        getattr(kernels, call)("acme/softmax", version=1)
    msg = str(e.value)
    assert e.value.status == 401 and "acme/softmax version 1" in msg
    assert "HF_TOKEN is set but the server refused it" in msg and "unset it to read public repos" in msg


def test_not_found_names_the_repo_and_the_way_out(registry):
    with pytest.raises(kernels.NotFoundError) as e:
        kernels.get_kernel("acme/absent", version=1)
    assert "acme/absent" in str(e.value) and "HF_TOKEN" in str(e.value) and registry.url in str(e.value)


def test_network_down_with_nothing_cached(monkeypatch):
    with pytest.raises(kernels.OfflineError) as e:  # the conftest endpoint is the discard port: nothing answers
        kernels.get_kernel("acme/softmax", version=1)
    msg = str(e.value)
    assert "acme/softmax version 1" in msg and "does not answer" in msg and "HF_ENDPOINT" in msg
    assert "kernels download" in msg  # and how to make the cache able to stand in next time


def test_network_down_on_publish_and_on_the_cli(softmax_bundle, capsys):
    with pytest.raises(kernels.HubUnreachableError, match="acme/softmax revision v1.0.0.*cannot publish v1.0.0"):
        publish(softmax_bundle, "acme/softmax", settings())
    assert main(["versions", "acme/softmax"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: acme/softmax") and "does not answer" in err and "Traceback" not in err


def test_a_publisher_that_loses_the_race_gets_the_projects_refusal(published, registry, monkeypatch):
    """Another publisher commits between this publish reading the branch head and committing: the Hub's 412."""
    from hub_client.bundle import build_bundle

    real = HfApi.create_commit

    def overtaken(self, repo_id, operations, **kwargs):
        if kwargs.get("commit_message", "").startswith("softmax"):
            real(HfApi(endpoint=registry.url, token=TOKEN), repo_id, [CommitOperationAdd("other.txt", b"x")],
                 commit_message="the other publisher", repo_type="kernel", revision="v1")  # fmt: skip
        return real(self, repo_id, operations, **kwargs)

    monkeypatch.setattr(HfApi, "create_commit", overtaken)
    with pytest.raises(kernels.PublishRefusedError) as e:
        publish(build_bundle(SOFTMAX, "1.0.1", benchmarks=False), "acme/softmax", settings())
    msg = str(e.value)
    assert "another publisher changed the repo first (412" in msg and "kernels versions acme/softmax" in msg
    tags = {t.name for t in HfApi(endpoint=registry.url).list_repo_refs("acme/softmax", repo_type="kernel").tags}
    assert tags == {"v1.0.0"}  # nothing of the loser was kept


def test_cli_errors_are_styled_and_messages_verbatim(registry, tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\n")
    assert main(["lock", str(tmp_path)]) == 1  # the message quotes [tool.kernels.dependencies], markup-like text
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no [tool.kernels.dependencies]" in err and "[red]" not in err
    terminal = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=terminal, force_terminal=True, color_system="standard"))
    monkeypatch.setenv("HF_TOKEN", "wrong")
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 1
    out = terminal.getvalue()
    assert "\x1b[1;31merror:\x1b[0m" in out  # rendered: bold red on a terminal, not the literal markup
    assert "[red]" not in out and "[/red]" not in out and "HF_TOKEN is set but the server refused it" in out


def _http_error(status: int, server_message: str = "", headers: dict | None = None):
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    request = httpx2.Request("POST", "http://127.0.0.1:1/api/kernels/acme/softmax/commit/v1")
    response = httpx2.Response(status, request=request, headers=headers or {})
    return HfHubHTTPError(f"{status} error", response=response, server_message=server_message or None)


@pytest.mark.parametrize("status, headers, kind, says", [
    (403, {}, kernels.AuthenticationError,
     "403 forbidden, the server says: no; the token is valid but may not publish v1.0.0; use a token with write"),
    (409, {}, kernels.PublishRefusedError, "another publisher changed the repo first (409, the server says: no)"),
    (429, {"Retry-After": "7"}, kernels.HubRequestError, "the Hub is busy (429, the server says: no); retry after 7 s"),
    (503, {}, kernels.HubRequestError, "the Hub is busy (503, the server says: no); retry in a moment"),
    (413, {}, kernels.HubRequestError, "the request is larger than the Hub accepts (413, the server says: no)"),
    (500, {}, kernels.HubRequestError, "HTTP 500, the server says: no; retry later; if it persists, report it"),
    (400, {}, kernels.HubRequestError, "HTTP 400, the server says: no; the request was refused as sent"),
], ids=lambda v: str(v) if isinstance(v, int) else None)  # fmt: skip
def test_every_status_becomes_a_kernel_hub_error_with_advice(status, headers, kind, says):
    from hub_client.hub_errors import translate

    e = translate(_http_error(status, " no ", headers), settings(), "acme/softmax", "v1.0.0", "publish v1.0.0")
    assert type(e) is kind and isinstance(e, kernels.KernelHubError)
    assert str(e).startswith("acme/softmax revision v1.0.0 at http://127.0.0.1:9: cannot publish v1.0.0: ")
    assert says in str(e), str(e)
    if kind is not kernels.PublishRefusedError:  # a caller that catches it reads what failed, not only the text
        assert (e.repo_id, e.revision, e.status) == ("acme/softmax", "v1.0.0", status)


def test_a_hostile_server_message_is_one_short_line(registry):
    from hub_client.hub_errors import translate

    e = translate(_http_error(500, "line\nbreak\r\n" + "x" * 5000), settings(), "acme/softmax", None, "read it")
    assert "\n" not in str(e) and "line break" in str(e) and len(str(e)) < 600
    assert translate(ValueError("not a Hub error"), settings(), "acme/softmax", None, "read it") is None
