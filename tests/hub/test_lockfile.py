"""kernels.lock and [tool.kernels.dependencies] as files: what is accepted, what is refused (and the message that
says why), and the exact format written (a file people commit and review in diffs)."""

import json

import pytest

from hub_client.errors import LockError
from hub_client.lockfile import Locked, dependencies, digests_path, read_lock, write_lock

A, B = "a" * 40, "b" * 40
DA, DB = "d" * 64, "e" * 64


def _project(tmp_path, body: str):
    (tmp_path / "pyproject.toml").write_text(body)
    return tmp_path


def test_dependencies_are_read_sorted(tmp_path):
    project = _project(tmp_path, '[tool.kernels.dependencies]\n"zeta/b" = 2\n"acme/a" = 0\n')
    assert list(dependencies(project).items()) == [("acme/a", 0), ("zeta/b", 2)]


def test_a_missing_pyproject_says_where_it_looked(tmp_path):
    with pytest.raises(LockError) as e:
        dependencies(tmp_path)
    where = tmp_path / "pyproject.toml"
    assert str(e.value) == f"{where}: not found (kernels lock reads [tool.kernels.dependencies] from it)"


@pytest.mark.parametrize("body", ["[project]\nname = 'x'\n", "[tool.kernels.dependencies]\n",
                                  "[tool.kernels]\ndependencies = ['acme/a']\n",
                                  "[tool.kernels]\ndependencies = 1\n", "tool = 5\n", "[tool]\nkernels = 'x'\n"],
                         ids=["absent", "empty", "a-list", "a-number", "tool-a-number", "kernels-a-string"])
def test_no_usable_dependency_table_is_refused(tmp_path, body):
    with pytest.raises(LockError) as e:
        dependencies(_project(tmp_path, body))
    assert str(e.value) == f'{tmp_path / "pyproject.toml"}: no [tool.kernels.dependencies] (e.g. "acme/softmax" = 1)'


@pytest.mark.parametrize("body", ["[tool.kernels\n", b"\xff\xfe"], ids=["unclosed-table", "not-utf8"])
def test_a_pyproject_that_is_not_toml_is_a_lock_error(tmp_path, body):
    # tomllib's TOMLDecodeError and the UnicodeDecodeError of reading it escaped dependencies()
    path = tmp_path / "pyproject.toml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(LockError, match="not valid TOML"):
        dependencies(tmp_path)


@pytest.mark.parametrize("entry", ['"acme" = 1', '"a/b/c" = 1', '"acme/a" = -1', '"acme/a" = true', '"acme/a" = "1"',
                                   '"acme/a" = 1.0'])  # fmt: skip
def test_a_malformed_dependency_is_refused_by_name(tmp_path, entry):
    with pytest.raises(LockError) as e:
        dependencies(_project(tmp_path, f"[tool.kernels.dependencies]\n{entry}\n"))
    repo_id = entry.split(" = ")[0].strip('"')
    assert f"dependency {repo_id!r} = " in str(e.value) and 'expected "org/name" = <major version>' in str(e.value)
    assert str(e.value).startswith(str(tmp_path / "pyproject.toml"))


def test_the_lock_file_format_is_hfs_and_the_digests_go_to_the_sidecar(tmp_path):
    path = tmp_path / "kernels.lock"
    entries = [Locked("zeta/b", 2, B, "v2.0.1", DB), Locked("acme/a", 1, A, None, DA)]
    write_lock(path, entries)
    # Exactly what HF kernels 0.17 writes (and parses: no field but dependency.repo-id/version and lock.commit).
    assert path.read_text() == (
        "[\n"
        '  {\n    "dependency": {\n      "repo-id": "acme/a",\n      "version": 1\n    },\n'
        f'    "lock": {{\n      "commit": "{A}"\n    }}\n  }},\n'
        '  {\n    "dependency": {\n      "repo-id": "zeta/b",\n      "version": 2\n    },\n'
        f'    "lock": {{\n      "commit": "{B}"\n    }}\n  }}\n'
        "]"
    )
    assert json.loads(digests_path(path).read_text()) == {
        "format": "nki-kernels-lock-digests/1",
        "locks": {"acme/a": {"commit": A, "tag": None, "manifest-sha256": DA},
                  "zeta/b": {"commit": B, "tag": "v2.0.1", "manifest-sha256": DB}},
    }  # fmt: skip
    assert digests_path(path).name == "kernels.lock.digests"
    assert read_lock(path) == {e.repo_id: e for e in entries}


def test_an_hf_lock_without_sidecar_pins_the_commit_only(tmp_path):
    path = tmp_path / "kernels.lock"
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": 1}, "lock": {"commit": A}},
                                {"dependency": {"repo-id": "acme/r", "revision": "main"}, "lock": {"commit": B}}]))
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, None, None),
                               "acme/r": Locked("acme/r", None, B, None, None)}  # fmt: skip


def test_the_older_single_file_form_is_still_read(tmp_path):
    path = tmp_path / "kernels.lock"
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": 1},
                                 "lock": {"commit": A, "tag": "v1.0.0", "digest": f"sha256:{DA}"}}]))  # fmt: skip
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, "v1.0.0", DA)}


def test_a_sidecar_for_another_commit_is_refused_as_stale(tmp_path):
    path = tmp_path / "kernels.lock"
    write_lock(path, [Locked("acme/a", 1, A, "v1.0.0", DA)])
    path.write_text(path.read_text().replace(A, B))  # the lock rewritten (say by HF's `kernels lock`), not the sidecar
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == (f"{digests_path(path)} pins acme/a at commit {A}, but kernels.lock at {B}: one of them is "
                            f"stale (the lock was rewritten without its digests); run `nki-kernels lock`")  # fmt: skip
    digests_path(path).write_text('{"format": "something else", "locks": {}}')
    with pytest.raises(LockError, match="not a nki-kernels-lock-digests/1 file"):
        read_lock(path)


def test_read_lock_refusals_name_the_file_and_the_fix(tmp_path):
    path = tmp_path / "kernels.lock"
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{path}: no lock file (run `nki-kernels lock {tmp_path}`)"
    path.write_text("[{")
    with pytest.raises(LockError, match=f"^{path}: not valid JSON \\(Expecting"):
        read_lock(path)
    path.write_text(json.dumps({"dependency": {}}))
    with pytest.raises(LockError, match="expected a JSON list of locked kernels"):
        read_lock(path)
    for data in ([{"dependency": {"repo-id": "acme/a"}}], [1], [{"dependency": {}, "lock": {"commit": A}}]):
        path.write_text(json.dumps(data))
        with pytest.raises(LockError) as e:
            read_lock(path)
        assert str(e.value) == f"{path}: each entry needs dependency.repo-id and lock.commit"
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": "x"}, "lock": {"commit": A}}]))
    with pytest.raises(LockError, match="acme/a: version must be a major version number, got 'x'"):
        read_lock(path)
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": 1}, "lock": {"commit": A[:-1]}}]))
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{path}: acme/a: commit must be 40 hex digits, lowercase, got {A[:-1]!r}"


def test_an_empty_lock_locks_nothing(tmp_path):
    path = tmp_path / "kernels.lock"
    path.write_text("[]")
    assert read_lock(path) == {}


def test_a_toml_error_is_quoted_at_most_200_characters(tmp_path):
    # tomllib's messages quote keys: a table of a 300-character name declared twice makes one of 357 characters
    key = "x" * 300
    _project(tmp_path, f"[tool.{key}]\n[tool.{key}]\n")
    with pytest.raises(LockError) as e:
        dependencies(tmp_path)
    said = f"Cannot declare ('tool', '{key}') twice (at line 2, column 307)"[:200]
    assert str(e.value) == f"{tmp_path / 'pyproject.toml'}: not valid TOML ({said})"
