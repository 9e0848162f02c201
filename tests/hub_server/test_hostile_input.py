"""File names git or a filesystem would reject, and malformed requests: each is a 400 with a message (never a 500),
nothing is written, and `git fsck --strict` stays clean (the `registry` fixture checks it after every test)."""

from __future__ import annotations

import base64
import json
import socket
from urllib.parse import quote, urlsplit

import pytest
from huggingface_hub import CommitOperationAdd
from huggingface_hub.errors import HfHubHTTPError

from .conftest import WRITE_TOKEN, git, ndjson, raw_request, repo_dir

COMMIT = "/api/kernels/acme/softmax/commit/v1"

# Each is refused by the registry; the comment says who else would refuse it.
HOSTILE_PATHS = [
    ".GIT/config",  # git fsck: hasDotgit (any case; Windows and macOS file systems ignore case)
    "a/.Git/x",
    "GIT~1/config",  # NTFS 8.3 short name of .git
    ".git./x",  # Windows drops a trailing dot: .git
    ".gitmodules",  # submodule config, audited by fsck (gitmodulesUrl ...): this registry has no submodules
    "sub/.GitModules",
    "x" * 5000,  # every file system: a name of at most 255 bytes
    "d/" + "y" * 256,
    "/".join(["d"] * 33),  # deeper than the 32-level bound
    " ",  # a blank name
    "a/ /b",
    "name.",  # Windows drops trailing dots and spaces: a name it cannot create as given
    "name ",
    "a\u202eb.txt",  # RIGHT-TO-LEFT OVERRIDE: the name displays as something else
    "a\u200db",  # ZERO WIDTH JOINER: HFS+ ignores it, so `.g\u200dit` is `.git` on a Mac
    "\ufeffbom.txt",
    "a\u2028b",  # LINE SEPARATOR
    "a\x7fb",  # DEL
    "a\x85b",  # NEL (C1 control)
    "a\ue000b",  # private use
    "a\U000e0001b",  # language tag (a format character)
    "con",  # Windows device names, with any extension and any case
    "Nul.txt",
    "dir/COM1.log",
    "a:b",  # Windows: forbidden (and ':' names NTFS alternate data streams)
    "a|b",
    "a?b",
    "a*b",
    'a"b',
    "a<b>",
    "e\u0301.txt",  # not NFC: macOS would store it as another name than Linux
]


def _state(registry):
    bare = repo_dir(registry, "acme/softmax")
    return git(bare, "for-each-ref").stdout, git(bare, "count-objects").stdout


def _file(path, content=b"x"):
    return {"key": "file", "value": {"content": base64.b64encode(content).decode(), "path": path,
                                     "encoding": "base64"}}


def _commit(registry, *lines: dict, raw: bytes | None = None):
    body = raw if raw is not None else ndjson({"key": "header", "value": {"summary": "hostile"}}, *lines)
    return raw_request(registry, "POST", COMMIT, body, token=WRITE_TOKEN,
                       headers={"Content-Type": "application/x-ndjson"})


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_a_path_git_or_a_filesystem_rejects_is_refused(api, registry, kernel_repo, path):
    before = _state(registry)
    response = _commit(registry, _file("good.txt"), _file(path))
    assert response.status == 400, (path, response.body)
    assert response.headers["x-error-message"] and response.json()["error"]
    preupload = raw_request(registry, "POST", "/api/kernels/acme/softmax/preupload/v1",
                            {"files": [{"path": path, "sample": "", "size": 1}]}, token=WRITE_TOKEN)
    assert preupload.status == 400, path
    for method in ("GET", "HEAD"):
        assert raw_request(registry, method, f"/kernels/acme/softmax/resolve/v1/{quote(path)}").status == 400
    assert _state(registry) == before


@pytest.mark.parametrize("path", [".GIT/config", "a/.Git/x", "x" * 300, " ", "a\u202eb.txt", "nul"])
def test_the_real_client_gets_a_400_for_such_a_path(api, registry, kernel_repo, path):
    before = _state(registry)
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="hostile",
                          operations=[CommitOperationAdd(path, b"x")])
    assert caught.value.response.status_code == 400
    assert caught.value.response.headers["x-error-message"]
    assert _state(registry) == before


def test_names_at_the_limits_are_accepted_and_git_is_happy_with_them(api, registry, kernel_repo):
    """One past each limit is refused above; exactly at it is stored, and fsck --strict (fixture teardown) agrees."""
    segment = "s" * 255
    longest = "/".join(["a" * 255, "b" * 255, "t" * 254, "u"])
    assert len(longest.encode()) == 768
    accepted = [
        segment,
        longest,
        "/".join(["d"] * 31 + ["leaf"]),  # 32 levels
        "café/naïve.txt",  # NFC
        "é" * 127,  # 254 bytes of UTF-8
        "a b.txt",  # an inner space
        ".github/workflows/ci.yml",  # starts like .git, is not .git
        ".gitignore",
        "console.txt",  # not a device name
        "git~x",
        "README.md",
    ]
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="limits",
                      operations=[CommitOperationAdd(path, path.encode()) for path in accepted])
    listed = set(api.list_repo_files(kernel_repo, repo_type="kernel", revision="v1"))
    assert set(accepted) <= listed
    for refused in ("/".join(["a" * 255, "b" * 255, "t" * 254, "uu"]), "é" * 128, "s" * 256,
                    "/".join(["d"] * 32 + ["leaf"])):
        assert _commit(registry, _file(refused)).status == 400, refused[:40]


def test_gitattributes_is_held_to_what_git_fsck_accepts(api, registry, kernel_repo):
    """fsck reports a .gitattributes line of 2048 bytes or more (gitattributesLineLength); 2047 is fine."""
    fine = b"*.bin binary\n" + b"a" * 2047 + b"\n"
    api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="attributes",
                      operations=[CommitOperationAdd(".gitattributes", fine),
                                  CommitOperationAdd("nested/.gitattributes", b"x" * 2047)])
    before = _state(registry)
    for path, content in ((".gitattributes", b"ok\n" + b"a" * 2048), ("deep/.GITATTRIBUTES", b"b" * 3000 + b"\n")):
        response = _commit(registry, _file(path, content))
        assert response.status == 400 and "2047" in response.headers["x-error-message"], path
    assert _state(registry) == before


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("what", "method", "path", "body"),
    [
        ("deeply nested JSON", "POST", "/api/repos/create", ('{"name": "x", "organization": "acme", "deep": '
                                                             + _deep(100_000) + "}").encode()),
        ("5,000-digit integer", "POST", "/api/kernels/acme/softmax/preupload/v1",
         b'{"files": [{"path": "a.txt", "sample": "", "size": 1' + b"0" * 5000 + b"}]}"),
        ("huge float", "POST", "/api/kernels/acme/softmax/branch/v9", b'{"startingPoint": 1e999}'),
        ("lone surrogate", "POST", "/api/kernels/acme/softmax/preupload/v1",
         b'{"files": [{"path": "a\\ud800.txt", "sample": "", "size": 1}]}'),
        ("invalid UTF-8", "POST", "/api/kernels/acme/softmax/tag/v1", b'{"tag": "v\xff1"}'),
        ("raw control character", "POST", "/api/kernels/acme/softmax/tag/v1", b'{"tag": "v\x011"}'),
        ("not an object", "POST", "/api/kernels/acme/softmax/tag/v1", b'["v1"]'),
        ("trailing garbage", "POST", "/api/kernels/acme/softmax/tag/v1", b'{"tag": "v1.0.0"} {"tag": "v2"}'),
        ("truncated", "POST", "/api/repos/create", b'{"name": "x", "organiz'),
        ("NUL in commit summary", "POST", COMMIT,
         ndjson({"key": "header", "value": {"summary": "a\x00b"}}, _file("nul.txt"))),
        ("NUL in commit description", "POST", COMMIT,
         ndjson({"key": "header", "value": {"summary": "ok", "description": "x\x00"}}, _file("nul.txt"))),
        ("deep NDJSON line", "POST", COMMIT, b'{"key": "header", "value": {"summary": "x"}}\n' + _deep(50).encode()),
        ("5,000-digit integer in NDJSON", "POST", COMMIT,
         ndjson({"key": "header", "value": {"summary": "x"}}) + b'{"key": "file", "value": {"size": 1'
         + b"0" * 5000 + b"}}\n"),
        ("summary past the line budget", "POST", COMMIT,
         ndjson({"key": "header", "value": {"summary": "s" * (1024 * 1024 + 1)}})),
        ("content that is not a string", "POST", COMMIT,
         ndjson({"key": "header", "value": {"summary": "x"}},
                {"key": "file", "value": {"content": 5, "path": "a.txt", "encoding": "base64"}})),
        ("header that is not first", "POST", COMMIT, ndjson(_file("a.txt"), {"key": "header", "value": {}})),
        ("two values on a line", "POST", COMMIT, b'{"key": "header", "value": {"summary": "x"}} {}\n'),
    ],
)
def test_malformed_bodies_are_400_with_a_message(registry, kernel_repo, what, method, path, body):
    before = _state(registry)
    response = raw_request(registry, method, path, body, token=WRITE_TOKEN)
    assert response.status == 400, (what, response.status, response.body[:200])
    assert response.headers["x-error-message"] and response.json()["error"], what
    assert _state(registry) == before


def test_the_real_client_gets_a_400_for_a_nul_in_the_commit_message(api, registry, kernel_repo):
    before = _state(registry)
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(kernel_repo, repo_type="kernel", revision="v1", commit_message="a\x00b",
                          operations=[CommitOperationAdd("x.txt", b"x")])
    assert caught.value.response.status_code == 400
    assert "NUL" in caught.value.response.headers["x-error-message"]
    assert _state(registry) == before


def _raw_exchange(server, data: bytes) -> tuple[int, bytes]:
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
    return int(answer.split(b" ")[1]), answer


def _post_head(*headers: str) -> bytes:
    return "\r\n".join([f"POST {COMMIT} HTTP/1.1", "Host: x", f"Authorization: Bearer {WRITE_TOKEN}",
                        *headers, "", ""]).encode()


@pytest.mark.parametrize(
    ("what", "data", "status"),
    [
        ("chunk-size line -5", _post_head("Transfer-Encoding: chunked") + b"-5\r\nhello\r\n0\r\n\r\n", 400),
        ("chunk-size line not hex", _post_head("Transfer-Encoding: chunked") + b"zz\r\nhello\r\n0\r\n\r\n", 400),
        ("chunk-size line of 17 digits", _post_head("Transfer-Encoding: chunked") + b"1" * 17 + b"\r\n", 400),
        ("chunk without its CRLF", _post_head("Transfer-Encoding: chunked") + b"5\r\nhelloXX0\r\n\r\n", 400),
        ("Content-Length not a number", _post_head("Content-Length: 12abc") + b"x" * 12, 400),
        ("negative Content-Length", _post_head("Content-Length: -5"), 400),
        ("two different Content-Lengths", _post_head("Content-Length: 5", "Content-Length: 6") + b"x" * 6, 400),
        ("Content-Length and chunked", _post_head("Content-Length: 5", "Transfer-Encoding: chunked")
         + b"5\r\nhello\r\n0\r\n\r\n", 400),
        ("a transfer coding other than chunked", _post_head("Transfer-Encoding: gzip") + b"x", 501),
        ("body shorter than its Content-Length, then EOF", None, 400),
    ],
)
def test_malformed_framing_is_refused_with_a_message(registry, kernel_repo, what, data, status):
    before = _state(registry)
    if data is None:
        url = urlsplit(registry.url)
        with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
            sock.sendall(_post_head("Content-Length: 100") + b"short")
            sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(65536)
        got = int(answer.split(b" ")[1])
    else:
        got, answer = _raw_exchange(registry, data)
    assert got == status, (what, answer[:300])
    assert b"x-error-message" in answer.lower(), what
    assert _state(registry) == before


def test_repo_info_and_resolve_never_500_on_odd_but_valid_requests(registry, kernel_repo):
    for path in ("/api/kernels/acme/softmax/tree/v1/" + quote("a" * 300), "/kernels/acme/softmax/resolve/v1/"
                 + quote("\u202e"), "/api/kernels/acme/softmax/revision/" + "a" * 300):
        response = raw_request(registry, "GET", path)
        assert response.status == 400 and response.headers["x-error-message"], path
    assert json.loads(raw_request(registry, "GET", "/api/kernels/acme/softmax").body)["id"] == "acme/softmax"
