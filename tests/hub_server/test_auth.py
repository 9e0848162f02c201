"""Tokens: writes need a write token, private repos need any valid token, refusals carry the Hub's headers."""

from __future__ import annotations

import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from hub_client.server.auth import ANONYMOUS, TokenTable, require_read, require_write
from hub_client.server.errors import BAD_CREDENTIALS, HubError, repo_not_found

from .conftest import READ_TOKEN, WRITE_TOKEN, git, ndjson, raw_request, repo_dir

COMMIT = ndjson(
    {"key": "header", "value": {"summary": "sneaky"}},
    {"key": "file", "value": {"path": "x.txt", "content": "eA==", "encoding": "base64"}},
)


def _refs(registry, repo_id="acme/softmax"):
    return git(repo_dir(registry, repo_id), "for-each-ref", "--format=%(refname) %(objectname)").stdout


@pytest.mark.parametrize(
    ("token", "status", "message"),
    [
        (None, 401, "Authorization required"),
        ("not-a-token", 401, "Invalid credentials in Authorization header"),
        (READ_TOKEN, 403, "read access only"),
    ],
)
def test_writes_without_a_write_token_are_refused_and_write_nothing(registry, kernel_repo, token, status, message):
    before = _refs(registry)
    writes = [
        ("POST", "/api/kernels/acme/softmax/commit/v1", COMMIT),
        ("POST", "/api/kernels/acme/softmax/branch/v2", {}),
        ("POST", "/api/kernels/acme/softmax/tag/v1", {"tag": "v1.0.0"}),
        ("DELETE", "/api/kernels/acme/softmax/branch/v1", None),
        ("POST", "/api/kernels/acme/softmax/preupload/v1", {"files": []}),
        ("POST", "/api/repos/create", {"name": "other", "organization": "acme", "type": "kernel"}),
        ("DELETE", "/api/repos/delete", {"name": "softmax", "organization": "acme", "type": "kernel"}),
    ]
    for method, path, body in writes:
        response = raw_request(registry, method, path, body, token=token)
        assert response.status == status, (method, path, response.body)
        assert message in response.headers["x-error-message"]
    assert _refs(registry) == before
    assert not (registry.root / "kernels" / "acme" / "other").exists()


def test_client_sees_bad_token_as_an_auth_error(registry, kernel_repo):
    api = HfApi(endpoint=registry.url, token="not-a-token")
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit("acme/softmax", repo_type="kernel", revision="v1", commit_message="x",
                          operations=[CommitOperationAdd("x.txt", b"x")])
    assert caught.value.response.status_code == 401
    assert not isinstance(caught.value, RepositoryNotFoundError)


def test_public_repos_are_readable_anonymously(registry, kernel_repo):
    assert raw_request(registry, "GET", "/api/kernels/acme/softmax/refs").status == 200
    assert raw_request(registry, "GET", "/kernels/acme/softmax/resolve/v1/manifest.json").status == 200


def test_a_read_token_reads_but_wrong_token_is_refused_even_for_reads(registry, kernel_repo):
    assert raw_request(registry, "GET", "/api/kernels/acme/softmax", token=READ_TOKEN).status == 200
    wrong = raw_request(registry, "GET", "/api/kernels/acme/softmax", token="nope")
    assert wrong.status == 401 and wrong.headers["x-error-message"] == "Invalid credentials in Authorization header"


def _without_date(response):
    return response.status, {k: v for k, v in response.headers.items() if k != "date"}, response.body


def test_private_repos_need_a_token_to_read_and_look_absent_to_strangers(registry, api, tmp_path):
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    api.upload_file(path_or_fileobj=b"hidden", path_in_repo="f.txt", repo_id="acme/secret", repo_type="kernel")
    for path in ("/api/kernels/acme/{}", "/api/kernels/acme/{}/refs", "/api/kernels/acme/{}/tree/main",
                 "/api/kernels/acme/{}/revision/main", "/kernels/acme/{}/resolve/main/f.txt"):
        for method in ("GET", "HEAD") if "/resolve/" in path else ("GET",):
            private = raw_request(registry, method, path.format("secret"))
            absent = raw_request(registry, method, path.format("secreu"))  # same length: same Content-Length
            assert private.status == 404 and private.error_code == "RepoNotFound", path
            assert b"hidden" not in private.body
            # Indistinguishable: status, every header but Date, and body (the name differs only as asked).
            assert _without_date(private) == _without_date(absent) or (
                private.status, private.body.replace(b"secret", b"secreu")) == (absent.status, absent.body), path
            assert {k: v.replace("secret", "secreu") for k, v in private.headers.items() if k != "date"} == {
                k: v for k, v in absent.headers.items() if k != "date"}, path
    assert HfApi(endpoint=registry.url, token=READ_TOKEN).repo_info("acme/secret", repo_type="kernel").private
    for repo_id in ("acme/secret", "acme/absent"):
        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=registry.url, token=False).repo_info(repo_id, repo_type="kernel")
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download(repo_id, "f.txt", repo_type="kernel", endpoint=registry.url, token=False,
                            cache_dir=tmp_path / "anonymous-cache")
    path = hf_hub_download("acme/secret", "f.txt", repo_type="kernel", endpoint=registry.url, token=READ_TOKEN,
                           cache_dir=tmp_path / "cache")
    assert open(path, "rb").read() == b"hidden"  # noqa: SIM115 - a one-shot read in a test


def test_organization_overview_counts_only_what_the_caller_may_read(registry, api):
    api.create_repo("acme/public-one", repo_type="kernel")
    api.create_repo("acme/hidden-one", repo_type="kernel", private=True)
    api.create_repo("acme/hidden-model", private=True)
    api.create_repo("shadow/only-private", repo_type="kernel", private=True)
    def counts(org, token):
        overview = raw_request(registry, "GET", f"/api/organizations/{org}/overview", token=token).json()
        return overview["numKernels"], overview["numModels"]

    assert counts("acme", None) == (1, 0)
    assert counts("acme", READ_TOKEN) == counts("acme", WRITE_TOKEN) == (2, 1)
    assert HfApi(endpoint=registry.url, token=False).get_organization_overview("acme").numKernels == 1
    # An org holding only private repos is, to a stranger, the same as an org that does not exist.
    only_private = raw_request(registry, "GET", "/api/organizations/shadow/overview")
    absent = raw_request(registry, "GET", "/api/organizations/shadoz/overview")
    assert only_private.status == absent.status == 404
    assert only_private.body.replace(b"shadow", b"shadoz") == absent.body
    assert counts("shadow", READ_TOKEN) == (1, 0)


def test_whoami_names_the_token_role(registry):
    assert HfApi(endpoint=registry.url, token=WRITE_TOKEN).whoami()["auth"]["accessToken"]["role"] == "write"
    assert HfApi(endpoint=registry.url, token=READ_TOKEN).whoami()["auth"]["accessToken"]["role"] == "read"
    assert raw_request(registry, "GET", "/api/whoami-v2").status == 401


def test_a_server_without_tokens_is_read_only(hub_env):
    from hub_client.server import serve

    with serve(hub_env / "hub") as server:
        response = raw_request(server, "POST", "/api/repos/create", {"name": "x", "organization": "acme"},
                               token=WRITE_TOKEN)
        assert response.status == 401


# -- the token table and the access rules, one by one ------------------------------------------------------------

def _status(call) -> tuple[int, str | None, str]:
    with pytest.raises(HubError) as caught:
        call()
    return caught.value.status, caught.value.code, caught.value.message


def test_token_table_roles_and_identities():
    table = TokenTable({"w": "write", "r": "read"})
    writer, reader = table.identify("Bearer w"), table.identify("Bearer r")
    assert writer.can_write and not reader.can_write
    assert writer.user != reader.user and ANONYMOUS.user not in (writer.user, reader.user)
    assert table.identify(None) is ANONYMOUS and table.identify("") is ANONYMOUS
    # An iterable (or one string) means write tokens.
    assert TokenTable(["a", "b"]).identify("Bearer b").can_write
    assert TokenTable("solo").identify("Bearer solo").can_write
    assert TokenTable(None).identify(None) is ANONYMOUS
    with pytest.raises(ValueError, match="role"):
        TokenTable({"x": "admin"})
    with pytest.raises(ValueError, match="^empty token$"):
        TokenTable({"": "read"})
    # Users are numbered in configuration order from 1: commit authors stay the same across restarts.
    assert [table.identify(f"Bearer {t}").user for t in ("w", "r")] == ["user1", "user2"]


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer w2", "Bearer ww", "Bearer  ", "Bearer", "Basic dzp4",
                                    "w", "Token w", "Bearer r w"])
def test_a_present_but_unknown_or_malformed_authorization_is_401_bad_credentials(header):
    table = TokenTable({"w": "write", "r": "read"})
    assert _status(lambda: table.identify(header)) == (401, None, BAD_CREDENTIALS)


def test_the_scheme_is_case_insensitive_and_the_token_exact():
    table = TokenTable({"w": "write"})
    assert table.identify("bearer w").can_write and table.identify("BEARER w").can_write
    assert table.identify("Bearer  w ").can_write  # surrounding spaces are not part of the token
    assert _status(lambda: table.identify("Bearer W"))[0] == 401


def test_write_needs_a_write_token():
    # The whole message, as the client shows it: it names what is missing (a token with write access).
    assert _status(lambda: require_write(ANONYMOUS)) == (
        401, "Unauthorized", "Authorization required: writing needs a bearer token with write access")
    reader = TokenTable({"r": "read"}).identify("Bearer r")
    assert _status(lambda: require_write(reader)) == (
        403, "Forbidden", "This token has read access only; writing needs a write token")
    require_write(TokenTable({"w": "write"}).identify("Bearer w"))  # no exception


def test_reading_private_repos_needs_any_valid_token():
    reader = TokenTable({"r": "read"}).identify("Bearer r")
    writer = TokenTable({"w": "write"}).identify("Bearer w")
    require_read(ANONYMOUS, False, "acme/public")
    require_read(reader, True, "acme/private")
    require_read(writer, True, "acme/private")
    refused = _status(lambda: require_read(ANONYMOUS, True, "acme/private"))
    absent = repo_not_found("acme/private")  # what Registry.open raises for a repo that does not exist
    assert refused == (absent.status, absent.code, absent.message) and refused[:2] == (404, "RepoNotFound")


def test_an_anonymous_write_to_a_private_repo_looks_like_one_to_an_absent_repo(registry, api):
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    for name in ("secret", "absent"):
        response = raw_request(registry, "POST", f"/api/kernels/acme/{name}/branch/x", {})
        assert (response.status, response.body) == (401, raw_request(registry, "POST", "/api/kernels/acme/absent/"
                                                                                         "branch/x", {}).body)


def test_a_read_token_reads_private_repos_through_every_read_endpoint(registry, api):
    api.create_repo("acme/secret", repo_type="kernel", private=True)
    api.upload_file(path_or_fileobj=b"hidden", path_in_repo="f.txt", repo_id="acme/secret", repo_type="kernel")
    for path in ("/api/kernels/acme/secret", "/api/kernels/acme/secret/refs", "/api/kernels/acme/secret/tree/main",
                 "/kernels/acme/secret/resolve/main/f.txt"):
        assert raw_request(registry, "GET", path, token=READ_TOKEN).status == 200, path
        assert raw_request(registry, "GET", path, token=WRITE_TOKEN).status == 200, path
    assert raw_request(registry, "GET", "/kernels/acme/secret/resolve/main/f.txt", token=READ_TOKEN).body == b"hidden"
    writes = raw_request(registry, "POST", "/api/kernels/acme/secret/branch/x", {}, token=READ_TOKEN)
    assert writes.status == 403
